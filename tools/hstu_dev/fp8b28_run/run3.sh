#!/bin/bash
# fp8b28 run 3 (issue 36, session 25): pair_dq (option bit 60, diag 1073741824) with relaxed remote arrivals and
# CTA-scope waits (run 1's cluster-scope release compiled to a MEMBAR.ALL.GPU per warp and shared tile, which waits
# for the warp's reduce-adds to reach L2; its acquire to an L1 invalidate). Its tests (tests/hstu/test_fp8_bwd.py
# -k "pair_dq or refuses"), then burst / sustained at B16 S16K against the default (main28's kernel, SASS-identical)
# in one process (variant_split.py: default, pair, default, pair; 1.5 s idle, 2.5 s windows), then
# compute-sanitizer memcheck of sancase.py (the default and pair_dq kernels on a small jagged case).
# `OUT=DIR timeout 56 bash .carry/fp8b28/run3.sh` from the root of main's tree (carry:
# tools/hstu_dev/fp8b28_run/pack.sh).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_fp8b28}; mkdir -p "$OUT"
C=$PWD/.carry/fp8b28
rm -rf /tmp/site_fp8b28
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b28 $C/whl/hstu_attn-*.whl 2>&1 \
    | grep -v WARN | tail -2
echo "install done ($SECONDS s)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
(PYTHONPATH=/tmp/site_fp8b28 timeout 16 $PT tests/hstu/test_fp8_bwd.py -k "pair_dq or refuses_a_variant" \
    > $OUT/tests.log 2>&1)
echo "tests rc $? ($SECONDS s)"
inst=
nvidia-smi --query-gpu=power.draw.instant --format=csv,noheader > /dev/null 2>&1 && inst=,power.draw.instant
why=
for f in clocks_event_reasons.active clocks_throttle_reasons.active; do
  nvidia-smi --query-gpu=$f --format=csv,noheader > /dev/null 2>&1 && { why=,$f; break; }
done
echo "smi fields: timestamp,clocks.sm,temperature.gpu,power.draw$inst$why" > $OUT/smi.err
nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw$inst$why --format=csv,noheader,nounits \
    -lms 50 > $OUT/smi.csv 2>> $OUT/smi.err &
SMI=$!
P=1073741824
DL=$(( $(date +%s) + 37 - SECONDS ))
(PYTHONPATH=/tmp/site_fp8b28 timeout $(( 39 - SECONDS )) python3 -P $C/variant_split.py $OUT --s 16384 \
    --diags 0,$P,0,$P --idle 1.5 --window 2.5 --tail 1 --deadline $DL > $OUT/split.log 2>&1)
echo "variant_split rc $? ($SECONDS s)"
kill $SMI 2> /dev/null
wait $SMI 2> /dev/null
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
L=$(( 49 - SECONDS ))
echo "memcheck: $L s"
if [ $L -gt 4 ]; then
  PYTHONPATH=/tmp/site_fp8b28 timeout $L $CS --tool memcheck --kernel-name kns=hstu_bwd_fp8_sm90_kernel \
      python3 -P $C/sancase.py > $OUT/san.log 2>&1
  echo "memcheck rc $? ($SECONDS s)"
fi
echo "#### digest: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -6 | cut -c1-300
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
grep "^| \|^|---\|^####" $OUT/split.log
grep "ERROR SUMMARY\|sancase\|window\|rror" $OUT/san.log | head -8 | cut -c1-200
gzip -f $OUT/smi.csv
echo "fp8b28 run 3 done at $SECONDS s"
