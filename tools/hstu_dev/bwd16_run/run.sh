#!/bin/bash
# bwd16 (issue 39, session 15), run 1 (<= 60 s), from the root of main's tree:
#   OUT=/tmp/o_bwd16 timeout 75 bash .carry/bwd16/run.sh > /tmp/o_bwd16/stdout.txt 2>&1
# (carry: this script, tools/hstu_dev/bwd15_run/setup.sh and ncu_digest.py, prof16.py, the wheel in whl/, the
# branch's tests/conftest.py and tests/hstu/{hstu_kernel_checks,test_sm80_backward_gpu,test_kernels_gpu}.py in tree/)
# The branch's D = 128 default is the one-pass unrolled body in the fixed phase order (session 14's opt-in cfg 13);
# kernel_options(bwd_sm80_cfg=13) at D = 128 runs main's default (the same body in FA2's order dV, dQ, dK), 10 the
# fixed-order body with the dV / dK k-loops unrolled, dP's by 4 and unpredicated dQ atomics (kPdsLoopFree).
# 1. GPU tests: grid / phase order (cfg 0 / 10 / 13 / 14 / 15, bitwise dK / dV / drab), the key-block limit (the
#    launcher's constant), which kernel runs (incl. 10 at D = 128, bf16 + fp16), the context kernel, candidates
#    9-12 at D = 128 against the reference, test_kernels_gpu.py's sm80 backward
# 2. time80.py (main's tools/hstu_dev/bwd80_run): branch cfg 0 / 10 / 13 + FA2; main15's wheel cfg 0 (causal B16
#    S4K / S16K, B128 S1K D128)
# 3. ncu (B16 S4K D128, one launch each of cfg 0 / 10 / 13): instructions per warp and tile pair, stalls, pipes
NAME=bwd16 MAIN=main15 LIM=57
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, wheels, GPU, T80, TF, TK, functions)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 20 $TF::test_sm80_backward_grid_and_phase_order $TF::test_sm80_backward_refuses_too_many_key_blocks \
    $TF::test_sm80_backward_second_round_runs_its_kernel $TF::test_sm80_backward_context_kernel \
    $TF::test_sm80_backward_second_round -k "not second_round[64 and not second_round[256" \
    $TK::test_sm80_backward_fa2_layout_matches_the_old_default $TK::test_sm80_backward_with_long_contexts \
    $TK::test_sm80_backward_candidate_runs_its_kernel
echo "== 2. time80 ($SECONDS s)"
time_vs_main 11 8 0 10 13
echo "== 3. ncu ($SECONDS s)"
ncu_profile prof16 hstu_bwd_pds 3 $C/prof16.py --cfgs 0 10 13
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd16: cfg 0 the default (D128: the one-pass unrolled body, fixed order); 10: the loop-free candidate; 13: main's D128 body (FA2 order)"
echo "#### ncu (cfg 0 / 10 / 13 in launch order)"
ncu_summary
