#!/bin/bash
# fp8b21 (issue 36, session 20), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b21 timeout 60 bash .carry/fp8b21/run3.sh > /tmp/o_fp8b21/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/fp8b21_run/pack.sh /work/main/.carry/fp8b21). The final candidate: the default kernel
# with three ring stages and the kept reduce-add address registers (run 2: stages3 0.946 / 0.966, red_keep 0.953 /
# 0.981, both 0.955 / 0.950 at S16K / S4K); the option field: main_kernel (1, the default before), no_stages3 (2),
# full_next (3, + tile i + 1's full-tile test one iteration early; not yet timed).
# One process: the whole tests/hstu/test_fp8_bwd.py, then the random-order benchmark with 30 reps.
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b21}
mkdir -p "$OUT"
C=$R/.carry/fp8b21
rm -rf /tmp/site_fp8b21 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b21 \
  $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b21 timeout 28 python3 -P tools/drive.py --tests-first --reps 30 --no-dequant \
   --variants default,main_kernel,no_stages3,full_next \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
