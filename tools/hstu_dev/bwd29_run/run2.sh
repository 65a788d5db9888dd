#!/bin/bash
# bwd29 (issue 39, session 26), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd29 timeout 56 bash .carry/bwd29/run2.sh > /tmp/o_bwd29/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd29_run/pack.sh /work/main/.carry/bwd29)
# Wheel: the sm_90+ one-barrier loops (D = 64 / 128 / 256, calls without contexts, both dtypes) store dK / dV through
# shared memory by default (kPdsSmemEpilogue); cfg 9 (bf16) is that loop with main's fragment-order stores.
# 1. GPU tests: the default against the fp32 reference and bitwise against cfg 9 (both grid orders, D = 64 / 128 /
#    256), which kernel runs (both dtypes), the tail order, D = 256's batch-first loop, the one-barrier tests on the
#    masks run 1 did not cover
# 2. time: cfg 0 (the new default) / 9 (main's stores) / FA2 at B128 S1K D128 / D64 / D256, B16 S4K / S16K D128
LIM=49
NAME=bwd29
BASE=main29
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 24 $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_one_barrier_runs_its_kernel \
    $K::test_sm80_d256_backward_runs_the_layout_that_fits $K::test_sm80_backward_candidate_runs_its_kernel \
    $T::test_sm80_backward_mbar_batch_first $T::test_sm80_backward_tail_blocks_first $T::test_sm80_backward_one_barrier \
    -k "not test_sm80_backward_one_barrier[ or dense-target or dense-none"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label $NAME --cfgs 0 9 \
    --reps 5 --impls ours fa2 --shapes B128:S1024:D128 B128:S1024:D64 B128:S1024:D256 B16:S4096:D128 \
    B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the new default (dK / dV through shared memory); cfg 9 = main's fragment-order stores"
