#!/bin/bash
# bwd18 (issue 39, session 17), run 2 (<= 40 s), from the root of main's tree:
#   OUT=/tmp/o_bwd18 timeout 60 bash .carry/bwd18/run2.sh > /tmp/o_bwd18/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd18_run/pack.sh /work/main/.carry/bwd18; run 1's script and its time18.py / prof18.py:
# commit 3624eed)
# Run 1 (wheel of 3624eed, opt-in): dQ into a fragment-ordered workspace with red.global.add.v4.f32 -7.5 / -8.5 /
# -3.5 / -14.3 % at B16 S4K / S16K / B128 S1K D128, B16 S4K D256 (scalar reds in that layout -6.6 / -7.8 / -2.7 %);
# lg_throttle 0.47 -> 0.13 per instruction, L1 reduction requests 8.65 M -> 4.33 M, L2 reduction sectors equal.
# Now the default: every 8-warp kernel of FA2's layout at D = 128 / 256 (sm_90+ code) adds dQ in that layout and flags
# it; hstu_dq_tile_convert_kernel reads the flagged layout (row-major from the other kernels). No switch.
# 1. GPU tests: the layouts (default and the old layouts (cfg 8) vs the reference, bf16 / fp16, outside rows zero),
#    grid / phase order (every cfg vs the default, dK / dV bitwise), the context kernel, the second round's kernels,
#    sm80 vs the reference (D 128 / 256)
# 2. main's time80.py: default, cfg 13 / 10 (with the new layout too: D = 128 the one-pass body in FA2's phase order /
#    with the dP k-loop fully unrolled; D = 256 the plain body with dQ-first warps / the default body in the fixed
#    order), FA2; main17's wheel (default)
NAME=bwd18 MAIN=main17 LIM=42
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
SH=(--only "B16 S4K D128" S16K S1K D256)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 23 $TF::test_sm80_backward_dq_workspace_layouts $TF::test_sm80_backward_grid_and_phase_order \
    $TF::test_sm80_backward_context_kernel $TF::test_sm80_backward_second_round_runs_its_kernel \
    $TK::test_sm80_and_sm90_kernels_agree_with_reference \
    -k "layouts or phase_order or context_kernel or kernel[128 or kernel[256 or reference[128 or reference[256"
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 9 python3 -P $T80 $NAME --cfgs 0 13 10 --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout $(( $(left) - 1 )) python3 -P $T80 $MAIN --cfgs 0 --reps 5 "${SH[@]}" \
    >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default (fragment-ordered dQ); cfg 13 / 10 (fragment-ordered too), FA2"
