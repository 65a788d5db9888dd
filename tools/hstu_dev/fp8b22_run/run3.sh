#!/bin/bash
# fp8b22 (issue 36, session 21), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b22 timeout 60 bash .carry/fp8b22/run3.sh > /tmp/o_fp8b22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/fp8b22_run/pack.sh /work/main/.carry/fp8b22). The final code: the default kernel with
# full_next (its SASS = run 2's default), no private variants (dq_bulk / dq_bulk_late and the A/B removed).
# One process: the whole tests/hstu/test_fp8_bwd.py, then the random-order benchmark with 20 reps (default twice).
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b22}
mkdir -p "$OUT"
C=$R/.carry/fp8b22
rm -rf /tmp/site_fp8b22 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b22 \
  $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b22 timeout 26 python3 -P tools/drive.py --tests-first --reps 20 --no-dequant \
   --variants default \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
