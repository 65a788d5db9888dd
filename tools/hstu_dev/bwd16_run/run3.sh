#!/bin/bash
# bwd16 (issue 39, session 15), run 3 (<= 40 s; confirms the final commit's default), from the root of main's tree:
#   OUT=/tmp/o_bwd16 timeout 75 bash .carry/bwd16/run3.sh > /tmp/o_bwd16/stdout.txt 2>&1
# (carry: as run.sh). D = 128's default body is now kPdsLoopFree (runs 1 / 2's cfg 10, the fastest in both: 0.8-1.1 %
# ahead of run 2's default kPdsLoopFreeDp, which is cfg 10 now); 12 kPdsLoopFreeStores (kPdsLoopFree with
# kPdsLoopFreeDp's four P / dS store addresses, dP by 4; opt-in), 13 main's default body.
# 1. GPU tests: the default path (grid / phase order with the cfgs bitwise, which kernel runs, the context kernel,
#    the key-block limit, test_kernels_gpu.py's FA2 layout vs the old default and sm80 vs the reference at D = 128)
# 2. time80.py: branch cfg 0 / 12 / 13 + FA2, main15's wheel cfg 0 (causal B16 S4K / S16K, B128 S1K D128)
NAME=bwd16 MAIN=main15 LIM=38
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, gpu_tests)
echo "== 1. GPU tests ($SECONDS s)"
F=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
gpu_tests 16 $F::test_sm80_backward_grid_and_phase_order $F::test_sm80_backward_second_round_runs_its_kernel \
    $F::test_sm80_backward_context_kernel $F::test_sm80_backward_refuses_too_many_key_blocks \
    $K::test_sm80_and_sm90_kernels_agree_with_reference $K::test_sm80_backward_fa2_layout_matches_the_old_default \
    -k "not reference[64 and not reference[256 and not old_default[256"
echo "== 2. time80 ($SECONDS s)"
SH=(--only "B16 S4K D128" S16K S1K)
PYTHONPATH=/tmp/site_bwd16 timeout 10 python3 -P $T80 bwd16 --cfgs 0 12 13 --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd16_main timeout 8 python3 -P $T80 main15 --cfgs 0 --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd16 final: cfg 0 the default (D128: kPdsLoopFree); 12: kPdsLoopFreeStores; 13: main's D128 body (FA2 order)"
