#!/bin/bash
# bwd29 (issue 39, session 26), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd29 timeout 56 bash .carry/bwd29/run1.sh > /tmp/o_bwd29/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd29_run/pack.sh /work/main/.carry/bwd29)
# Wheel: cfg 9 (bf16, sm_90+, calls without contexts): the default's loop with dK / dV leaving through shared memory
# (kPdsSmemEpilogue: stmatrix into K / V's buffers, then 16-byte row stores); the default kernels are main's.
# 1. GPU tests: cfg 9 against the fp32 reference and bitwise against the default at D = 64 / 128 / 256 in both grid
#    orders, which kernel runs, the one-barrier loop tests (cfg 9 among the cfgs) on jagged causal / local + context
# 2. time: cfg 0 (main's kernels) / 9 / FA2 at B128 S1K D128 / D64 / D256, B16 S4K / S16K D128
# 3. count: a key block's fixed cost a and a full pair's p (no-mask line, D128) under cfg 0 and 9
LIM=49
NAME=bwd29
BASE=main29
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_backward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 18 $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_one_barrier_runs_its_kernel \
    $T::test_sm80_backward_one_barrier -k "smem_epilogue or runs_its_kernel or (jagged and (causal or local_context))"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 14 python3 -P $B21 time --label $NAME --cfgs 0 9 --reps 5 --impls ours fa2 \
    --shapes B128:S1024:D128 B128:S1024:D64 B128:S1024:D256 B16:S4096:D128 B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. count ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $C/count28.py --cfgs 0 9 \
    --causal 0 9 --iters 2 > $OUT/count.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the default (main's kernels); cfg 9 = dK / dV through shared memory"
