#!/bin/bash
# bwd16 (issue 39, session 15), run 2 (<= 45 s), from the root of main's tree:
#   OUT=/tmp/o_bwd16 timeout 75 bash .carry/bwd16/run2.sh > /tmp/o_bwd16/stdout.txt 2>&1
# (carry: as run.sh)
# The branch's D = 128 default is now the loop-free body kPdsLoopFreeDp: run 1's cfg 10 (dV / dK k-loops unrolled,
# unpredicated dQ atomics) with the P / dS store addresses as four bases plus immediates, which freed the registers
# for the dP k-loop fully unrolled (sm_90a). kernel_options(bwd_sm80_cfg=10) at D = 128 runs run 1's cfg 10
# (kPdsLoopFree: dP by 4), 12 the default body in FA2's phase order dV, dQ, dK (kPdsLoopFreeFa2: the atomics under
# the dK MMAs; run 1's cfg 10 had lg_throttle and barrier stalls up), 13 main's default (the one-pass body in FA2's
# order).
# 1. GPU tests: grid / phase order (cfg 0 / 10 / 12 / 13 / 14 / 15, bitwise dK / dV / drab), the key-block limit, which
#    kernel runs, the context kernel, candidates 9-12 at D = 128 against the reference and the default,
#    test_kernels_gpu.py's sm80 backward (FA2 layout vs the old default, sm80 vs reference at D = 128, candidates)
# 2. time80.py (main's tools/hstu_dev/bwd80_run): branch cfg 0 / 10 / 12 / 13 + FA2; main15's wheel cfg 0 (causal B16
#    S4K / S16K, B128 S1K D128)
# 3. ncu (B16 S4K D128, one launch each of cfg 0 / 12): instructions per warp and tile pair, stalls, pipes
NAME=bwd16 MAIN=main15 LIM=44
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, wheels, GPU, T80, TF, TK, functions)
echo "== 1. GPU tests ($SECONDS s)"
default_path_tests 16 $TF::test_sm80_backward_second_round $TK::test_sm80_backward_candidate_runs_its_kernel
echo "== 2. time80 ($SECONDS s)"
time_vs_main 11 8 0 10 12 13
echo "== 3. ncu ($SECONDS s)"
ncu_profile prof16b hstu_bwd_pds 2 $C/prof16.py --cfgs 0 12
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd16: cfg 0 the default (D128: kPdsLoopFreeDp); 10: run 1's cfg 10 (dP by 4); 12: the default in FA2's order; 13: main's D128 body (FA2 order)"
echo "#### ncu (cfg 0 / 12 in launch order)"
ncu_summary
