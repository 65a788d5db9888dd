#!/bin/bash
# fp8b28 run 2 (issue 36, session 25): where run 1's 1.44x of pair_dq goes. Lab wheel: the default (main28's kernel,
# SASS-identical) and, with kFp8BwdPairDq (diag 1073741824): + 512 timing-only, the clusters and the paired grid
# with no exchange; + 32768 timing-only, the exchange's barriers without its bytes (no st.async); + 268435456, the
# symmetric halves (each block sums half: 16 KB each way per tile, correct); the pair itself. B16 S16K causal H4
# D128, fp8b27's variant_split.py (1 s idle, 2 s back to back the benchmark's way, nvidia-smi beside it), then
# compute-sanitizer memcheck of sancase.py (pair_dq and the halves on a small jagged case, causal and local; dk / dv
# bit-equal to the default) in the time left.
# `OUT=DIR timeout 56 bash .carry/fp8b28/run2.sh` from the root of main's tree (carry:
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
DL=$(( $(date +%s) + 28 - SECONDS ))
(PYTHONPATH=/tmp/site_fp8b28 timeout $(( 30 - SECONDS )) python3 -P $C/variant_split.py $OUT --s 16384 \
    --diags 0,$((P | 512)),$((P | 32768)),$((P | 268435456)),$P --idle 1 --window 2 --tail 1 --deadline $DL \
    > $OUT/split.log 2>&1)
echo "variant_split rc $? ($SECONDS s)"
kill $SMI 2> /dev/null
wait $SMI 2> /dev/null
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
L=$(( 48 - SECONDS ))
echo "memcheck: $L s"
if [ $L -gt 5 ]; then
  PYTHONPATH=/tmp/site_fp8b28 timeout $L $CS --tool memcheck --kernel-name "regex:Li1734294528E|Li2002729984E" \
      python3 -P $C/sancase.py --half > $OUT/san.log 2>&1
  echo "memcheck rc $? ($SECONDS s)"
fi
echo "#### digest: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
grep -v "^| \|^|---" $OUT/split.log | tail -3 | cut -c1-200
grep "^| \|^|---\|^####" $OUT/split.log
grep "ERROR SUMMARY\|sancase\|window\|rror" $OUT/san.log | head -8 | cut -c1-200
timeout 2 python3 $C/smi_join.py $OUT --bin 1 > $OUT/smi_join.md
grep -A1 "^####\|^| burst\|^| sustained" $OUT/smi_join.md | grep -v "^| bin\|^--$" | cut -c1-200
gzip -f $OUT/smi.csv
echo "fp8b28 run 2 done at $SECONDS s"
