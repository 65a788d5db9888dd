#!/bin/bash
# fp8b22 (issue 36, session 21), run 1 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b22 timeout 60 bash .carry/fp8b22/run.sh > /tmp/o_fp8b22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/fp8b22_run/pack.sh /work/main/.carry/fp8b22). Wheel: the branch's (its default kernel's
# SASS = main21's); option bits 59 full_next, 60 dq_bulk (dQ through a shared-memory slot per warp and one 1-D bulk
# reduce-add instead of 8 red.global.add.v4), both: full_next_dq_bulk.
# 1. one process (tree/tools/drive.py): a GPU test selection (the three variants against the default and against the
#    fp64 emulation, many groups), then the random-order benchmark with 30 reps (default twice)
# 2. ncu of the FP8 backward kernel at B16 S16K, default then dq_bulk (speed of light, warp states, source counters),
#    exported as csv (raw page, source page with SASS) for the digest off the device
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b22}
mkdir -p "$OUT"
C=$R/.carry/fp8b22
rm -rf /tmp/site_fp8b22 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b22 \
  $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) wheel $(basename $C/whl/hstu_attn-*.whl) ($SECONDS s)"
echo "== 1. GPU tests, benchmark: one process ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b22 timeout 22 python3 -P tools/drive.py --tests-first --reps 30 --no-dequant \
   --variants default,full_next,dq_bulk,full_next_dq_bulk \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   -k "(kernel_matches_emulating and block and causal) or many_groups or (variant_matches_the_kernel and block and (causal or local_context)) or (variant_matches_emulating and causal) or refuses_a_variant" \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
echo "== 2. ncu S16K default, dq_bulk ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T=$(( 39 - SECONDS ))
if [ $T -gt 8 ]; then
  PYTHONPATH=/tmp/site_fp8b22 timeout $T $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel" -c 2 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats \
      -o $OUT/fp8k -f python3 -P $C/tree/tools/ncu_case.py 16384 16384:dq_bulk > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  tail -4 $OUT/ncu.log | cut -c1-200
  if [ -f $OUT/fp8k.ncu-rep ]; then
    timeout 4 $NCU --import $OUT/fp8k.ncu-rep --page raw --csv --print-metric-instances values > $OUT/raw.csv \
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
