#!/bin/bash
# fp8b22 (issue 36, session 21), run 2 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_fp8b22 timeout 60 bash .carry/fp8b22/run2.sh > /tmp/o_fp8b22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/fp8b22_run/pack.sh /work/main/.carry/fp8b22). The candidate default (run 1's winners
# in it); the option field: 1 main_kernel (main's default kernel, the A/B), 2 dq_bulk, 3 dq_bulk_late (bits 59-60).
# One process: the whole tests/hstu/test_fp8_bwd.py, then the random-order benchmark with 30 reps (default twice).
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b22}
mkdir -p "$OUT"
C=$R/.carry/fp8b22
rm -rf /tmp/site_fp8b22 && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b22 \
  $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) wheel $(basename $C/whl/hstu_attn-*.whl) ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b22 timeout 37 python3 -P tools/drive.py --tests-first --reps 30 --no-dequant \
   --variants default,main_kernel,dq_bulk,dq_bulk_late \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
