#!/bin/bash
# bwd33 (issue 39, session 30), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd33 timeout 56 bash .carry/bwd33/run1.sh > /tmp/o_bwd33/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd33_run/pack.sh /work/main/.carry/bwd33)
# Wheel: the dQ fragment pointer from one helper, the dQ split over the keys removed (the default's kernels as
# main's: SASS compared here), and cfg 15 = 128-query tiles at D = 64 (kPdsTile128 on kPdsMbarCopies' two stages).
# 1. GPU tests: test_kernel_options.py and every D = 64 case of test_sm80_backward_gpu.py (both dtypes; the loop
#    tests run cfg 15 beside the others)
# 2. time: cfg 0 / 15 / FA2 at B16 S8K / S4K D64 (batch first), B128 S1K D64 (heads first), median of 7, interleaved
# 3. prof: every kernel of one backward at B16 S8K D64 (cfg 0, cfg 15, FA2) with its device time: the main kernels
#    and the share outside them
LIM=49 NAME=bwd33 BASE=main33
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests 24 tests/hstu/test_kernel_options.py \
    $T::test_sm80_backward_one_barrier_runs_its_kernel $T::test_sm80_backward_d64_loop_cfgs \
    $T::test_sm80_backward_dq_workspace_layouts $T::test_sm80_backward_context_kernel \
    $T::test_sm80_backward_one_barrier $T::test_sm80_backward_tail_blocks_first \
    $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_stsm_pds \
    -k "[64 or d64_loop or not backward_"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 15 --reps 7 --impls ours fa2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B128:S1024:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $B21 prof --cfgs 0 15 \
    --impls ours fa2 --shapes B16:S8192:D64 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the default (main's kernels); 15 = 128-query tiles (kPdsTile128)"
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
echo "#### prof (B16 S8K D64)"
cut -c1-160 $OUT/prof.log
