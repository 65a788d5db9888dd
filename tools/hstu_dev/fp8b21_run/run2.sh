#!/bin/bash
# fp8b21 (issue 36, session 20), run 2 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b21 timeout 60 bash .carry/fp8b21/run2.sh > /tmp/o_fp8b21/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/fp8b21_run/pack.sh /work/main/.carry/fp8b21). Wheel of the branch: dot_separate and
# lpt_tail removed (no use in run 1); the option field's kernel variants stages3 (1), red_keep (2: the dQ
# reduce-adds' address registers kept live through the loop, so the loop top's tile-map load no longer waits for
# the LSU to take them: run 1's ncu, 7 % of the stall samples), red_keep_full_next (3: and tile i + 1's full-tile
# test in iteration i, under its GEMMs: the mask section, 14 % of the samples).
# 1. one process: the whole tests/hstu/test_fp8_bwd.py first (the variants bit-equal to the default in dk / dv),
#    then the random-order benchmark (14 reps): default twice, stages3, red_keep, red_keep_full_next
# 2. ncu of red_keep_full_next at B16 S16K (source counters, warp states): where the loop top's stall went
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b21}
mkdir -p "$OUT"
C=$R/.carry/fp8b21
rm -rf /tmp/site_fp8b21 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b21 \
  $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
echo "== 1. GPU tests (whole file), then the benchmark: one process ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b21 timeout 24 python3 -P tools/drive.py --tests-first --reps 14 --no-dequant \
   --variants default,stages3,red_keep,red_keep_full_next \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
echo "== 2. ncu red_keep_full_next S16K ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
T=$(( 37 - SECONDS ))
if [ $T -gt 8 ]; then
  PYTHONPATH=/tmp/site_fp8b21 timeout $T $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel" -c 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
      -o $OUT/redkeep -f python3 -P $C/tree/tools/ncu_case.py 16384 --bits $(( 3 << 59 )) > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  tail -3 $OUT/ncu.log | cut -c1-200
  if [ -f $OUT/redkeep.ncu-rep ]; then
    timeout 4 $NCU --import $OUT/redkeep.ncu-rep --page raw --csv --print-metric-instances values > $OUT/raw2.csv \
      2>> $OUT/ncu.log
    timeout $(( 43 - SECONDS > 2 ? 43 - SECONDS : 2 )) $NCU --import $OUT/redkeep.ncu-rep --page source --csv \
      --print-source sass > $OUT/src2.csv 2>> $OUT/ncu.log
    echo "exports rc $? ($SECONDS s)"
    gzip -f $OUT/src2.csv $OUT/raw2.csv
    rm -f $OUT/redkeep.ncu-rep
  fi
fi
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
