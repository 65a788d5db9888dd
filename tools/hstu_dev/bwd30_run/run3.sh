#!/bin/bash
# bwd30 (issue 39, session 27), run 3 (<= 49 s; a third run only if the lead offers one), from the root of main's
# tree:  OUT=/tmp/o_bwd30 timeout 56 bash .carry/bwd30/run3.sh > /tmp/o_bwd30/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd30_run/pack.sh /work/main/.carry/bwd30)
# Wheel: run 2's cfgs with the stmatrix loop's full-tile branch warp-uniform (stmatrix is warp-wide; keep is per
# lane: run 2's tests did not return from their first case), cfg 12 (the Q / dO copies from pointers alone), and the
# default's P / dS stores written as main's.
# 1. probe: one backward per cfg 0 / 12 / 11 / 10 (synchronized, printed): which returns, dK / dV against cfg 0
# 2. GPU tests: cfg 10 / 11 / 12 against the fp32 reference and bitwise against the default (D = 64 / 128, both grid
#    orders, causal / local + targets + rab + delta-q), which kernel runs
# 3. time: cfg 0 (main's kernels) / 11 / 12 / FA2 at B16 S8K / S4K D64, B16 S4K / S16K D128, B128 S1K D128
LIM=49
NAME=bwd30
BASE=main30
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
T=tests/hstu/test_sm80_backward_gpu.py
echo "== 1. probe ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout 8 python3 -P $C/probe30.py --cfgs 0 12 11 10 > $OUT/probe.log 2>&1)
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
gpu_tests 17 $T::test_sm80_backward_stsm_pds $T::test_sm80_backward_one_barrier_runs_its_kernel \
    -k "(stsm and (causal or local_target)) or kernel[64 or kernel[128"
echo "== 3. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 3 ? $(left) - 2 : 1 )) python3 -P $B21 time --label $NAME \
    --cfgs 0 11 12 --reps 5 --impls ours fa2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B16:S4096:D128 B128:S1024:D128 B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the default (main's kernels); 11 = P / dS by stmatrix + Q / dO copies from pointers; 12 = the copies"
echo "#### probe"
cut -c1-200 $OUT/probe.log
