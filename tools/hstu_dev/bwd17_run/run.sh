#!/bin/bash
# bwd17 (issue 39, session 16), run 1 (<= 50 s), from the root of main's tree:
#   OUT=/tmp/o_bwd17 timeout 75 bash .carry/bwd17/run.sh > /tmp/o_bwd17/stdout.txt 2>&1
# (carry: this script, tools/hstu_dev/bwd15_run/setup.sh and ncu_digest.py, time17.py, prof17.py, the wheel in whl/,
# the branch's tests/conftest.py and tests/hstu/{hstu_kernel_checks,test_sm80_backward_gpu}.py in tree/)
# The branch's sm80-class default kernels (FA2's layout) run in three grid orders (kernel_options(bwd_sm80_grid=n)):
# 1 batch first (main's, still the default: (batch, key blocks, heads)), 2 heads first (heads, key blocks, batch),
# 3 key blocks first (FA2's: (key blocks, batch, heads)).
# 1. GPU tests: the grid orders (0 / 1 / 2 / 3 against the reference, bitwise dK / dV / drab), grid / phase order
#    (the cfgs), the key-block limit
#    At D = 256 (bf16) kernel_options(bwd_sm80_cfg=10 / 11) run D = 128's default body (kPdsLoopFree: the k-loops
#    unrolled, unpredicated dQ atomics) in the fixed order / with dQ-first warps (D = 256's default order).
# 2. time17.py: default, orders 2 / 3, D256 cfg 10 / 11, FA2 (B16 S4K / S16K / B128 S1K D128, B16 S4K D256);
#    main16's wheel
# 3. ncu: B16 S4K default, S16K default, S16K heads first, FA2 S16K: L2 hit rates, DRAM bytes, reductions, stalls,
#    occupancy, the SMs' active cycles (tail)
NAME=bwd17 MAIN=main16 LIM=52
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, wheels, GPU, TF, TK, gpu_tests)
T17=$C/time17.py
SH=(--only "B16 S4K D128" S16K S1K D256)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 12 $TF::test_sm80_backward_grid_orders $TF::test_sm80_backward_grid_and_phase_order \
    $TF::test_sm80_backward_refuses_too_many_key_blocks
echo "== 2. time17 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $T17 $NAME --vars 0 g2 g3 c10@D256 c11@D256 --fa2 --reps 5 "${SH[@]}" \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout 6 python3 -P $T17 $MAIN --vars 0 --reps 3 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 8 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 2 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats \
      --metrics lts__t_sector_hit_rate.pct,lts__t_sector_op_red_hit_rate.pct,lts__t_sectors_op_red.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,smsp__inst_executed.sum,lts__average_gcomp_input_sector_success_rate.pct \
      -o $OUT/prof17 -f python3 -P $C/prof17.py --runs 4096:0 16384:0 16384:g2 16384:fa2 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof17.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu17.py $OUT/ncu_raw.csv --pairs $(grep -o "pairs [0-9]*" $OUT/ncu.log | awk '{printf "%s ", $2}') > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
echo "#### time17 (ms (TFLOP/s); 0 the default (batch first, main's), g2 heads first, g3 key blocks first, c10 / c11 D256 loop-free fixed / dQ-first; $MAIN main's wheel)"
grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-220
echo "#### ncu (S4K default, S16K default, S16K heads first, FA2 S16K)"
tail -3 $OUT/ncu.log 2>/dev/null | cut -c1-200
cat $OUT/ncu_digest.md 2>/dev/null | cut -c1-260
