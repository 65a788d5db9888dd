#!/bin/bash
# bwd19 (issue 39, session 18), run 1 (<= 40 s), from the root of main's tree:
#   OUT=/tmp/o_bwd19 timeout 60 bash .carry/bwd19/run.sh > /tmp/o_bwd19/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd19_run/pack.sh /work/main/.carry/bwd19)
# Wheel of the branch: two opt-in D = 128 bodies (bf16 / fp16) in place of no-gain comparison bodies:
#   cfg 10: the default body with the barrier after phase 1 split into named barriers (pairs / quads of producers)
#   cfg 12: the default body with ds_scale out of the pointwise pass (dS / ds_scale = dP (1 + F'), one FMA)
# 1. GPU tests: grid / phase order (cfg 10 bitwise, cfg 12 by the error rule, both vs the fp32 reference), the dQ
#    workspace layouts (the converter now scales by the flag word), the candidates vs the default (D 128)
# 2. ncu source counters, B1 S16K D128: the default and FA2 (instructions and stall samples per part: src_parts.py)
# 3. time80.py: cfg 0 / 10 / 12 + FA2 at B16 S4K / S16K / B128 S1K D128, B16 S4K D256, B16 S8K D64 (D = 64: cfg 0
#    the old layout, 10 FA2's 128 x 128 tile, 12 that pipelined); main18's wheel (cfg 0)
NAME=bwd19 MAIN=main18 LIM=43
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
SH=(--only "B16 S4K D128" S16K S1K D256 D64)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 9 $TF::test_sm80_backward_grid_and_phase_order $TF::test_sm80_backward_dq_workspace_layouts \
    $TF::test_sm80_backward_second_round -k "phase_order or layouts or round[128"
echo "== 2. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 13 $NCU --clock-control none -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c 2 \
    --section SourceCounters --section WarpStateStats --section InstructionStats \
    --metrics smsp__inst_executed.sum,gpu__time_duration.sum \
    -o $OUT/src19 -f python3 -P $C/prof17.py --batch 1 --runs 16384:0 16384:fa2 > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/src19.ncu-rep --page source --csv --print-source sass > $OUT/src19.csv 2>> $OUT/ncu.log
$NCU --import $OUT/src19.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
    > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
python3 $C/src_parts.py $OUT/src19.csv --pairs $(grep -o "pairs [0-9]*" $OUT/ncu.log | awk '{printf "%s ", $2}') \
    > $OUT/src_parts.md 2>&1
gzip -f $OUT/src19.csv
echo "exports ($SECONDS s)"
echo "== 3. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 9 python3 -P $T80 $NAME --cfgs 0 10 12 --fa2 --reps 5 "${SH[@]}" \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $T80 $MAIN --cfgs 0 \
    --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default; cfg 10: named barriers after phase 1; cfg 12: ds_scale out of dS; FA2"
echo "#### ncu source counters (B1 S16K D128: default, FA2; per warp and pair)"
tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "^###|^\| |^opcodes" $OUT/src_parts.md 2>/dev/null | cut -c1-400
