#!/bin/bash
# bwd17 (issue 39, session 16), run 2 (<= 50 s; the last run), from the root of main's tree:
#   OUT=/tmp/o_bwd17 timeout 75 bash .carry/bwd17/run2.sh > /tmp/o_bwd17/stdout.txt 2>&1
# (carry: this script, tools/hstu_dev/bwd15_run/setup.sh, time17.py, prof17.py, ncu17.py, the wheel in whl/, the
# branch's tests/conftest.py and tests/hstu/{hstu_kernel_checks,test_sm80_backward_gpu,test_kernels_gpu}.py in tree/;
# bash tools/hstu_dev/bwd17_run/pack.sh .carry/bwd17. Run 1's script: run.sh of 65b26e4)
# Run 1: the grid orders changed nothing (heads first: L2 hits 86 -> 96 %, DRAM reads 9.3 -> 2.7 GB at S16K, same
# time); D = 256 with D = 128's loop-free body and dQ-first warps 4.1 % faster. So now:
# - D = 256's default body is kPdsLoopFreeDqFirst (bf16 and fp16); bwd_sm80_cfg=13 / 14 at D = 256: main's plain body
#   with dQ-first warps / the fixed order, 10 the loop-free body in the fixed order.
# - D = 128 (where ours has lg_throttle 0.39 stalls per instruction, FA2 0.007): kernel_options(bwd_sm80_variant=1)
#   scalar dQ reductions (FA2's form), 2 dQ and its atomics before dV / dK (every warp), 3 both (wheel of 993224e;
#   slower, removed after this run, with test_sm80_backward_body_variants).
# 1. GPU tests: D = 256's default (grid / phase order at D = 256: cfg 0 / 10 / 11 / 12 / 13 / 14 / 15 bitwise,
#    bf16 + fp16; sm80 vs the reference at D = 256, causal and context + targets), the D = 128 variants (causal)
# 2. time17.py: default, v1 / v2 / v3 (D128), c13 / c10 (D256), FA2; main16's wheel (default, cfg 4 at D256)
# 3. ncu (if time is left): B16 S4K D128 default, v1, v2: stalls
NAME=bwd17 MAIN=main16 LIM=50
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, wheels, GPU, TF, TK, gpu_tests)
T17=$C/time17.py
SH=(--only D256 "B16 S4K D128" S16K S1K)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 26 $TF::test_sm80_backward_grid_and_phase_order $TK::test_sm80_and_sm90_kernels_agree_with_reference \
    $TF::test_sm80_backward_body_variants \
    -k "phase_order[256 or reference[256-causal or reference[256-context or body_variants[causal"
echo "== 2. time17 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 11 python3 -P $T17 $NAME --vars 0 v1@D128 v2@D128 v3@D128 c13@D256 c10@D256 \
    --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout 8 python3 -P $T17 $MAIN --vars 0 --reps 3 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 9 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 2 )) $NCU --clock-control none -k "regex:hstu_bwd_pds" -c 3 \
      --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,lts__t_sectors_op_red.sum \
      -o $OUT/prof17b -f python3 -P $C/prof17.py --runs 4096:0 4096:v1 4096:v2 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof17b.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu17.py $OUT/ncu_raw.csv --pairs $(grep -o "pairs [0-9]*" $OUT/ncu.log | awk '{printf "%s ", $2}') \
      > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/ PASSED.*\| FAILED.*//' | sed 's/\[.*//' | sort | uniq -c
echo "#### time17 (ms (TFLOP/s); 0 the default (D256: loop-free dQ-first), v1 scalar dQ reds, v2 dQ first, v3 both (D128), c13 main's D256 body, c10 D256 loop-free fixed order; $MAIN main's wheel)"
grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-220
echo "#### ncu (S4K D128: default, v1, v2)"
tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "gpu__time|stall|inst|red" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
