#!/bin/bash
# bwd16 (issue 39, session 15), run 1 (<= 60 s), from the root of main's tree:
#   OUT=/tmp/o_bwd16 timeout 75 bash .carry/bwd16/run.sh > /tmp/o_bwd16/stdout.txt 2>&1
# The branch's D = 128 default is the one-pass unrolled body in the fixed phase order (session 14's opt-in cfg 13);
# kernel_options(bwd_sm80_cfg=13) at D = 128 runs main's default (the same body in FA2's order dV, dQ, dK), 10 the
# fixed-order body with the dV / dK k-loops unrolled and dP's by 4 (kPdsLoopFree, candidate).
# 1. GPU tests (branch files in .carry/bwd16/tree): grid / phase order (cfg 0 / 10 / 13 / 14 / 15, bitwise dK / dV
#    / drab), the key-block limit (the launcher's constant), which kernel runs (incl. 10 at D = 128, bf16 + fp16),
#    the context kernel, candidates 9-12 at D = 128 against the reference, test_kernels_gpu.py's sm80 backward
# 2. time80.py (main's tools/hstu_dev/bwd80_run): branch cfg 0 / 10 / 13 + FA2; main15's wheel cfg 0 (causal B16
#    S4K / S16K, B128 S1K D128)
# 3. ncu (B16 S4K D128, one launch each of cfg 0 / 10 / 13): instructions per warp and tile pair, stalls, pipes
LIM=57
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80)
echo "== 1. GPU tests ($SECONDS s)"
cd $C/tree
F=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
# (-v: a line per test as it ends, so a run cut by the timeout still says which passed; node ids in this order)
PYTHONPATH=/tmp/site_bwd16 timeout 20 python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short \
    --maxfail=3 -rfE $F::test_sm80_backward_grid_and_phase_order $F::test_sm80_backward_refuses_too_many_key_blocks \
    $F::test_sm80_backward_second_round_runs_its_kernel $F::test_sm80_backward_context_kernel \
    "$F::test_sm80_backward_second_round" -k "not second_round[64 and not second_round[256" \
    $K::test_sm80_backward_fa2_layout_matches_the_old_default $K::test_sm80_backward_with_long_contexts \
    $K::test_sm80_backward_candidate_runs_its_kernel > $OUT/tests.log 2>&1
echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
cd $R
echo "== 2. time80 ($SECONDS s)"
SH=(--only "B16 S4K D128" S16K S1K)
PYTHONPATH=/tmp/site_bwd16 timeout 11 python3 -P $T80 bwd16 --cfgs 0 10 13 --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd16_main timeout 8 python3 -P $T80 main15 --cfgs 0 --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 6 ]; then
  PYTHONPATH=/tmp/site_bwd16 timeout $(( $(left) - 1 )) $NCU --clock-control none -k "regex:hstu_bwd_pds" -c 3 \
      --section SpeedOfLight --section WarpStateStats --section InstructionStats \
      -o $OUT/prof16 -f python3 -P $C/prof16.py --cfgs 0 10 13 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  PAIRS=$(grep -o "prof16 pairs [0-9]*" $OUT/ncu.log | awk '{print $3}')
  $NCU --import $OUT/prof16.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs ${PAIRS:-67584} > $OUT/ncu_digest.md 2>&1
  $NCU --import $OUT/prof16.ncu-rep --page raw --csv --print-metric-instances details \
      --metrics sass__inst_executed_per_opcode > $OUT/ncu_opcodes.csv 2>> $OUT/ncu.log
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd16: cfg 0 the default (D128: the one-pass unrolled body, fixed order); 10: the loop-free candidate; 13: main's D128 body (FA2 order)"
echo "#### ncu (cfg 0 / 10 / 13 in launch order)"; tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "inst_executed.sum |per warp and pair |issue_active.avg.pct_of_peak_sustained_active|pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch)|gpu__time" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "per warp and pair|per HMMA" $OUT/ncu_digest.md 2>/dev/null | cut -c1-400
