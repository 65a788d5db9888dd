#!/bin/bash
# bwd64 (issue 39, session 18), run 1 (<= 35 s), from the root of main's tree:
#   OUT=/tmp/o_bwd64 timeout 60 bash .carry/bwd64/run.sh > /tmp/o_bwd64/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd64_run/pack.sh /work/main/.carry/bwd64)
# Wheel of the branch: at D = 64 (bf16, opt-in) cfg 10 = the FA2-layout kernel with D = 128's 64 x 128 tile, its
# loop-free body and the fragment-ordered dQ workspace (red.global.add.v4); cfg 12 = that with dQ-first warps;
# cfg 9 = cfg 10's body launched two blocks per SM (128 registers a thread).
# cfg 0 at D = 64 is the old layout (main's default).
# 1. GPU tests: the D = 64 candidates vs the fp32 reference and the default (jagged / dense, five masks, rab / drab,
#    deterministic), which kernel runs, the dQ workspace layouts at D = 64
# 2. time80.py (the branch's copy: + B16 S4K D64): cfg 0 / 9 / 10 / 12 + FA2 at B16 S8K / S4K D64; main18's cfg 0
NAME=bwd64 MAIN=main18 LIM=34
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
T80=$C/time80.py
SH=(--only "S8K D64" "S4K D64")
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 14 $TF::test_sm80_backward_second_round_runs_its_kernel $TF::test_sm80_backward_dq_workspace_layouts \
    $TF::test_sm80_backward_second_round -k "kernel[64 or layouts[64 or round[64"
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 9 python3 -P $T80 $NAME --cfgs 0 9 10 12 --fa2 --reps 5 "${SH[@]}" \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $T80 $MAIN --cfgs 0 \
    --reps 5 --only "S8K D64" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "D = 64: cfg 0 the old layout (main's default); 10 FA2 layout 64 x 128, loop-free, fragment dQ; 9 10 at two blocks per SM; 12 10 + dQ-first warps; FA2"
