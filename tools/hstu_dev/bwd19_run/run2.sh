#!/bin/bash
# bwd19 (issue 39, session 18), run 2 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_bwd19 timeout 60 bash .carry/bwd19/run2.sh > /tmp/o_bwd19/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd19_run/pack.sh /work/main/.carry/bwd19)
# Run 1 (280ddb3): named barriers after phase 1 +3-5 %, ds_scale out of dS +0.7 % (both dropped); ncu source counters
# at B1 S16K: 455 of the default's 1,233 instructions per warp and pair are integer / uniform / move / control, ~130
# of them the next tile's Q / dO copies, ~30 the full-tile test. Now (wheel of this commit; the default unchanged):
#   cfg 12 (D = 128 / 256): the default body with the lean Q / dO copies
#   cfg 10 (D = 128): cfg 12 with the full-tile test from two intervals per key block
# 1. GPU tests: grid / phase order (cfg 10 / 12 vs the reference, and bitwise dK / dV / drab vs the default), which
#    kernel runs, the candidates (cfg 9-12) vs the reference at D = 128 / 256 (five masks, jagged and dense)
# 2. time80.py: cfg 0 / 12 / 10 + FA2 at B16 S4K / S16K / B128 S1K D128, B16 S4K D256
# 3. ncu, B1 S16K D128: default, cfg 12, cfg 10, FA2 (instructions per warp and pair, opcode mix, stalls)
NAME=bwd19 MAIN=main18 LIM=43
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
SH=(--only "B16 S4K D128" S16K S1K D256)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 16 $TF::test_sm80_backward_grid_and_phase_order $TF::test_sm80_backward_second_round_runs_its_kernel \
    $TF::test_sm80_backward_second_round \
    -k "round[128 or round[256 or phase_order or kernel[128 or kernel[256"
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 9 python3 -P $T80 $NAME --cfgs 0 12 10 --fa2 --reps 5 "${SH[@]}" \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 9 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c 4 --section InstructionStats --section WarpStateStats \
      --metrics smsp__inst_executed.sum,gpu__time_duration.sum -o $OUT/prof19 -f \
      python3 -P $C/prof17.py --batch 1 --runs 16384:0 16384:c12 16384:c10 16384:fa2 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof19.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs 66048 > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default; cfg 12: lean Q / dO copies; cfg 10: those + the full-tile intervals; FA2"
echo "#### ncu (B1 S16K D128: default, cfg 12, cfg 10, FA2; 66,048 tile pairs)"
tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "gpu__time|inst_executed.sum |per warp and pair|stalled_(barrier|long|short|wait|math|mio|not_sel)" \
    $OUT/ncu_digest.md 2>/dev/null | cut -c1-300
