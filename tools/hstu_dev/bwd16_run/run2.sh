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
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, gpu_tests, ncu_profile)
echo "== 1. GPU tests ($SECONDS s)"
F=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
gpu_tests 16 $F::test_sm80_backward_grid_and_phase_order $F::test_sm80_backward_second_round_runs_its_kernel \
    $F::test_sm80_backward_second_round $K::test_sm80_and_sm90_kernels_agree_with_reference \
    $F::test_sm80_backward_refuses_too_many_key_blocks $F::test_sm80_backward_context_kernel \
    $K::test_sm80_backward_fa2_layout_matches_the_old_default $K::test_sm80_backward_candidate_runs_its_kernel \
    -k "not second_round[64 and not second_round[256 and not reference[64 and not reference[256"
echo "== 2. time80 ($SECONDS s)"
SH=(--only "B16 S4K D128" S16K S1K)
PYTHONPATH=/tmp/site_bwd16 timeout 11 python3 -P $T80 bwd16 --cfgs 0 10 12 13 --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd16_main timeout 8 python3 -P $T80 main15 --cfgs 0 --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
ncu_profile prof16b hstu_bwd_pds 2 $C/prof16.py --cfgs 0 12
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd16: cfg 0 the default (D128: kPdsLoopFreeDp); 10: run 1's cfg 10 (dP by 4); 12: the default in FA2's order; 13: main's D128 body (FA2 order)"
echo "#### ncu (cfg 0 / 12 in launch order)"; tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "inst_executed.sum |per warp and pair |issue_active.avg.pct_of_peak_sustained_active|pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch)|gpu__time" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
