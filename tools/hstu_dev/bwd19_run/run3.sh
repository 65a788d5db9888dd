#!/bin/bash
# bwd19 (issue 39, session 18), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_bwd19 timeout 60 bash .carry/bwd19/run3.sh > /tmp/o_bwd19/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd19_run/pack.sh /work/main/.carry/bwd19)
# The final code (wheel of this commit): the loop-free default bodies (D = 128 / 256) copy full Q / dO tiles with the
# lean copies, and at D = 128 test full tiles against two intervals per key block (run 2's cfg 12 / 10, now the
# default; the comparison cfgs removed).
# 1. GPU tests of the default path, in this order as time allows: sm80 vs the reference (D 128 / 256, five masks), FA2
#    layout vs the old default (D 128 / 256, bf16 / fp16, three masks with seqused / rab / delta-q; also cfg 4-7, the
#    one-stage kernel among them), which kernel runs, grid / phase order (the other bodies vs the default), the dQ
#    workspace layouts
# 2. time80.py: the default + FA2, then main18's default, at B16 S4K / S16K / B128 S1K D128, B16 S4K D256
NAME=bwd19 MAIN=main18 LIM=30
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
SH=(--only "B16 S4K D128" S16K S1K D256)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 12 $TK::test_sm80_and_sm90_kernels_agree_with_reference \
    $TK::test_sm80_backward_fa2_layout_matches_the_old_default \
    $TF::test_sm80_backward_second_round_runs_its_kernel $TF::test_sm80_backward_grid_and_phase_order \
    $TF::test_sm80_backward_dq_workspace_layouts \
    -k "reference[128 or reference[256 or old_default or kernel[128 or kernel[256 or phase_order or layouts"
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 8 python3 -P $T80 $NAME --cfgs 0 --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $T80 $MAIN --cfgs 0 \
    --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default (lean copies, full-tile intervals at D = 128); FA2; main18's default"
