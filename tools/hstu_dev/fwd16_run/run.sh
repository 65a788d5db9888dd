#!/bin/bash
# fwd16 (issue 39, session 15), run 1 (<= 57 s), from the root of main's tree (main 794b180 on the device):
#   OUT=/tmp/o_fwd16 timeout 75 bash .carry/fwd16/run.sh > /tmp/o_fwd16/stdout.txt 2>&1
# The portable forward at D = 256 by warp pairs (fwd_sm80_cfg 1: 64 x 64 tiles, 105 KB; 3: 64 x 32, 69 KB; 5: 128 x 64
# of 8 warps, 146 KB) and at D = 64 three blocks per SM (cfg 5), against the defaults (D256 cfg 2, D64 cfg 1) and FA2;
# cfg 4: the default's tile (D256: the pairs) with the per-warp skip in tiles with context rows (contexts vs causal);
# the jagged Zipf(1.2) B32 D256 ctx3 batch against dense batches of the same tokens.
# 1. GPU tests (branch files in .carry/fwd16/tree): test_sm80_forward_gpu.py at D = 256 / 64 (every candidate vs the
#    fp32 reference and vs the default; the kernel each cfg runs)
# 2. fwd16_time.py: main15's wheel cfg 0; the branch cfg 0 / 1 / 3 / 5 + FA2; contexts vs causal
# 3. ncu (one launch each): D256 cfg 2 (default) and 1 (pairs), D64 cfg 1 (default), FA2 D256
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, the wheels, GPU, T, PT)
left() { echo $((54 - SECONDS)); }
echo "== 1. GPU tests ($SECONDS s)"
cd $C/tree
for d in "11 256 and not long_rows" "6 64 and not long_rows and not gr_convention"; do  # (D = 256: GR cases too)
  set -- $d
  t=$1; shift
  PYTHONPATH=/tmp/site_fwd16 timeout $t $PT tests/hstu/test_sm80_forward_gpu.py -k "$*" >> $OUT/tests.log 2>&1
  echo "-k $*: rc $? (124: time ran out; $SECONDS s)"
done
cd $R
echo "== 2. time ($SECONDS s)"
MS=(--masks "D256 causal" "D256 ctx64" "D128 causal" "D128 ctx64" "D64 causal" "D64 ctx64")
PYTHONPATH=/tmp/site_fwd16_main timeout 7 python3 -P $T main15 --cfgs 0 --no-fa2 --reps 8 --mask-cfgs 0 "${MS[@]}" \
    --jagged-cfgs 0 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_fwd16 timeout 11 python3 -P $T fwd16 --cfgs 0 1 3 4 5 --reps 8 --mask-cfgs 0 1 4 "${MS[@]}" \
    --jagged-cfgs 0 1 2 4 >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ "$(left)" -gt 8 ]; then
  PYTHONPATH=/tmp/site_fwd16 timeout $(( $(left) - 3 )) $NCU --clock-control none -c 4 \
      -k "regex:hstu_fwd_kernel|flash_fwd" \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section InstructionStats --section Occupancy -o $OUT/prof16 -f \
      python3 -P $C/prof16.py 256:2 256:1 64:0 --fa2 256 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof16.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $R/tools/hstu_dev/bwd15_run/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests
echo "#### time (ms (TFLOP/s); main15 = main 794b180's wheel)"
grep -E "^###|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (kernels in order: D256 cfg 2, D256 cfg 1 (pairs), D64 cfg 1, FA2 D256)"
tail -2 $OUT/ncu.log | cut -c1-300; cut -c1-300 $OUT/ncu_digest.md 2>/dev/null | head -70
