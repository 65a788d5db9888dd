#!/bin/bash
# fp8b21 (issue 36, session 20), run 1 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b21 timeout 60 bash .carry/fp8b21/run.sh > /tmp/o_fp8b21/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/fp8b21_run/pack.sh /work/main/.carry/fp8b21). Wheel: the branch's (its default kernel's
# SASS byte-identical to main20's; the option field's value 2 is now stages3, the kernel with three stages per ring,
# instead of lpt256).
# 1. one process (tree/tools/drive.py): the random-order benchmark, default twice + dot_separate / stages3 / lpt_tail
#    (12 reps), the path's per-kernel breakdown at S16K / S4K (torch.profiler), a GPU test selection (stages3 against
#    the default: dk / dv bit-equal; the sync model with three stages)
# 2. ncu of the FP8 backward kernel at B16 S16K then S4K (speed of light, compute / memory workloads, warp states,
#    scheduler, source counters), exported as csv (raw page, source page with SASS) for the digest off the device
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b21}
mkdir -p "$OUT"
C=$R/.carry/fp8b21
W=$R/.carry/main20/whl
[ -d $C/whl ] && ls $C/whl/hstu_attn-*.whl > /dev/null 2>&1 && W=$C/whl
rm -rf /tmp/site_fp8b21 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b21 \
  $W/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) wheel $(basename $W/hstu_attn-*.whl) ($SECONDS s)"
echo "== 1. benchmark, breakdown, GPU tests: one process ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b21 timeout 19 python3 -P tools/drive.py --reps 12 --no-dequant \
   --variants default,dot_separate,stages3,lpt_tail --bd 16384,4096 --bd-bits default,stages3 \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   -k "(kernel_matches_emulating and block) or many_groups or rows_outside or (variant_matches_the_kernel and block) or sync_protocol" \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
echo "== 2. ncu S16K, S4K ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T=$(( 37 - SECONDS ))
if [ $T -gt 8 ]; then
  PYTHONPATH=/tmp/site_fp8b21 timeout $T $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel" -c 2 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section SourceCounters --section Occupancy \
      --section LaunchStats -o $OUT/fp8k -f python3 -P $C/tree/tools/ncu_case.py 16384 4096 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  tail -4 $OUT/ncu.log | cut -c1-200
  if [ -f $OUT/fp8k.ncu-rep ]; then
    timeout 5 $NCU --import $OUT/fp8k.ncu-rep --page raw --csv --print-metric-instances values > $OUT/raw.csv \
      2>> $OUT/ncu.log
    timeout $(( 43 - SECONDS > 2 ? 43 - SECONDS : 2 )) $NCU --import $OUT/fp8k.ncu-rep --page source --csv \
      --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
    echo "exports rc $? ($SECONDS s)"
    gzip -f $OUT/src.csv $OUT/raw.csv
    ls -la $OUT/*.gz $OUT/*.ncu-rep | awk '{print $5, $9}'
    [ $(stat -c %s $OUT/fp8k.ncu-rep) -gt 20000000 ] && rm -f $OUT/fp8k.ncu-rep
  fi
fi
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
