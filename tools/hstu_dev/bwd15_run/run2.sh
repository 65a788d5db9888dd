#!/bin/bash
# bwd15 (issue 39, session 14), run 2 (<= 60 s), from the root of main's tree:
#   OUT=/tmp/o_bwd15 timeout 75 bash .carry/bwd15/run2.sh > /tmp/o_bwd15/stdout.txt 2>&1
# The branch's D = 128 default kernel is new: dP in one pass, the S and dQ k-loops unrolled, phases dV, dQ, dK
# (FA2's order); kernel_options(bwd_sm80_cfg=14) at D = 128 runs the plain body that was the default (SASS-identical
# to main's hstu_bwd_pds_kernel<bf16, 128, 2, 8>), 15 the plain body with dP in one pass. D = 256: default dQ-first
# warps, 14 the fixed order (main's), 15 D = 128's default body.
# 1. GPU tests (branch files in .carry/bwd15/tree), the new ones first: grid / phase order (cfg 0 / 13 / 14 / 15,
#    bitwise dK / dV), the key-block limit, which kernel runs, then test_kernels_gpu.py's sm80 backward selection
# 2. time80.py (main's tools/hstu_dev/bwd80_run): branch cfg 0 / 14 / 15 + FA2; main14's wheel cfg 0 (causal B16
#    S4K / S16K, B128 S1K D128, B16 S4K D256)
# 3. ncu (B16 S4K D128, one launch): the branch's default kernel: instructions per HMMA, stalls, tensor pipe
LIM=57
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80)
echo "== 1. GPU tests ($SECONDS s)"
cd $C/tree
F=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
# (-v: a line per test as it ends, so a run cut by the timeout still says which passed; node ids in this order)
PYTHONPATH=/tmp/site_bwd15 timeout 22 python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short \
    --maxfail=3 -rfE $F::test_sm80_backward_grid_and_phase_order $F::test_sm80_backward_refuses_too_many_key_blocks \
    $F::test_sm80_backward_context_kernel $F::test_sm80_backward_second_round_runs_its_kernel \
    $K::test_sm80_backward_fa2_layout_matches_the_old_default $K::test_sm80_backward_with_long_contexts \
    $K::test_sm80_d256_backward_layouts $F::test_sm80_backward_long_contexts_drab > $OUT/tests.log 2>&1
echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
cd $R
echo "== 2. time15 ($SECONDS s)"
SH=(--only "B16 S4K D128" S16K S1K "S4K D256")
PYTHONPATH=/tmp/site_bwd15 timeout 12 python3 -P $T80 bwd15 --cfgs 0 14 15 --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd15_main timeout 9 python3 -P $T80 main14 --cfgs 0 --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 7 ]; then
  PYTHONPATH=/tmp/site_bwd15 timeout $(( $(left) - 1 )) $NCU --clock-control none -k "regex:hstu_bwd_pds_kernel" -c 1 \
      --section SpeedOfLight --section WarpStateStats --section InstructionStats \
      -o $OUT/prof15b -f python3 -P $C/prof15.py --seq 4096 --no-fa2 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof15b.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
  # (the opcode names of the instruction mix, where this ncu prints instance details)
  $NCU --import $OUT/prof15b.ncu-rep --page raw --csv --print-metric-instances details \
      --metrics sass__inst_executed_per_opcode > $OUT/ncu_opcodes.csv 2>> $OUT/ncu.log
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd15: cfg 0 the default (D128 new body, D256 dQ-first); 14: D128 the old plain body, D256 the fixed order; 15: D128 plain + one dP pass, D256 D128's default body"
echo "#### ncu"; tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "inst_executed.sum |issue_active.avg.pct_of_peak_sustained_active|pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch)|gpu__time" $OUT/ncu_digest.md 2>/dev/null | cut -c1-160
grep -A2 "^#### sass__inst_executed_per_opcode$" $OUT/ncu_digest.md 2>/dev/null | cut -c1-400
