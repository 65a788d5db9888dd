#!/bin/bash
# bwd64 (issue 39, session 18), run 2 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_bwd64 timeout 60 bash .carry/bwd64/run2.sh > /tmp/o_bwd64/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd64_run/pack.sh /work/main/.carry/bwd64, after DONE1)
# Wheel of the branch: D = 64's default on sm_90+ is FA2's layout with D = 128's 64 x 128 tile, loop-free body with
# dQ-first warps, fragment-ordered dQ (run 1's cfg 12), bf16 and fp16, with a context kernel (it skips the context
# gap); cfg 8 the old layout, cfg 10 the default body in the fixed order (run 1's cfg 10); run 1's cfg 9 (two blocks
# per SM) is gone.
# 1. GPU tests of the D = 64 default path: which kernel runs (with and without contexts), the dQ workspace layouts,
#    sm80 vs the reference (five masks), long contexts, the FA2 layout vs the old default (bf16 / fp16, rab, seqused,
#    delta-q, deterministic), the candidates vs the default
# 2. time80.py (the branch's copy): cfg 0 / 8 / 10 + FA2 at B16 S8K / S4K D64 (cfg 8 = main's D = 64 default, the old
#    layout; run 1: main18's wheel 6.765 ms at S8K against the branch's old layout 6.723 in the run before)
NAME=bwd64 MAIN=main18 LIM=29
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
T80=$C/time80.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 18 $TF::test_sm80_backward_second_round_runs_its_kernel $TF::test_sm80_backward_context_kernel \
    $TF::test_sm80_backward_dq_workspace_layouts $TK::test_sm80_and_sm90_kernels_agree_with_reference \
    $TK::test_sm80_backward_with_long_contexts $TK::test_sm80_backward_fa2_layout_matches_the_old_default \
    $TF::test_sm80_backward_second_round \
    -k "kernel[64 or layouts[64 or reference[64 or contexts[64 or old_default[64 or round[64"
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 8 python3 -P $T80 $NAME --cfgs 0 8 10 --fa2 --reps 5 --only "S8K D64" "S4K D64" \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "D = 64: cfg 0 the new default (FA2 layout 64 x 128, loop-free, dQ-first, fragment dQ); 8 the old layout; 10 fixed order; FA2"
