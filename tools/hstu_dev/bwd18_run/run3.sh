#!/bin/bash
# bwd18 (issue 39, session 17), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_bwd18 timeout 60 bash .carry/bwd18/run3.sh > /tmp/o_bwd18/stdout.txt 2>&1
# Run 2 (wheel of dc3e04a, the fragment-ordered dQ by default): -8.1 / -9.4 / -5.2 / -14.6 % against main17 at B16 S4K
# / S16K / B128 S1K D128, B16 S4K D256 (1.07x / 1.00x / 1.09x / 1.10x FA2); 26 GPU tests passed. Now, same wheel:
# 1. the rest of the sm80-class backward's GPU tests that run 2 left out (D = 256's layouts, which kernel runs, the FA2
#    layout against the old default, long contexts, drab with long contexts, the key-block limit), as many as fit
# 2. ncu, B16 S16K D128: the default and FA2 (what is left of the gap: instructions, stalls)
NAME=bwd18 MAIN=main17 LIM=30
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, TF, TK, gpu_tests)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 17 $TK::test_sm80_d256_backward_layouts $TK::test_sm80_d256_backward_runs_the_layout_that_fits \
    $TK::test_sm80_backward_candidate_runs_its_kernel $TK::test_sm80_backward_fa2_layout_matches_the_old_default \
    $TK::test_sm80_backward_with_long_contexts $TF::test_sm80_backward_long_contexts_drab \
    $TF::test_sm80_backward_refuses_too_many_key_blocks
echo "== 2. ncu ($SECONDS s)"
B17=$R/tools/hstu_dev/bwd17_run
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 7 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 2 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c 2 --section SpeedOfLight --section WarpStateStats \
      --metrics smsp__inst_executed.sum,lts__t_sectors_op_red.sum \
      -o $OUT/prof18 -f python3 -P $B17/prof17.py --runs 16384:0 16384:fa2 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof18.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $B17/ncu17.py $OUT/ncu_raw.csv --pairs $(grep -o "pairs [0-9]*" $OUT/ncu.log | awk '{printf "%s ", $2}') \
      > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/ PASSED.*\| FAILED.*//' | sed 's/\[.*//' | sort | uniq -c
echo "#### ncu (B16 S16K D128: default, FA2)"
tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "gpu__time|stall|inst|red|hit|tensor" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
