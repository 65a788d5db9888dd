#!/bin/bash
# fp8b20 (issue 36, session 19), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b20 timeout 60 bash .carry/fp8b20/run3.sh > /tmp/o_fp8b20/stdout.txt 2>&1
# The final code (wheel of fp8b20 1024ed0: a pair of >= 128 key blocks a group of its own in the grid, no PDL,
# variants dot_separate / lpt256 / lpt_tail). One process (tools/drive.py: now tools/hstu_dev/fp8b21_run/drive.py):
# a short benchmark (the default twice, in two places of the rotation), then the whole tests/hstu/test_fp8_bwd.py.
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b20}
mkdir -p "$OUT"
C=$R/.carry/fp8b20
rm -rf /tmp/site_fp8b20 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b20 \
  $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader) ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b20 timeout $(( 29 - SECONDS )) python3 -P tools/drive.py --reps 6 --no-dequant \
   --variants default,lpt256,lpt_tail,dot_separate -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE \
   tests/hstu/test_fp8_bwd.py > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\| B|drive|passed|failed|FAILED|ERROR|rror" | cut -c1-600
