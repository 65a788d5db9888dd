#!/bin/bash
# fp8b27 run 2 (issue 36, session 24): the FP8 backward's energy split at B16 S16K, burst against sustained, by the
# lab wheel's timing-only kernel variants (.carry/fp8b27/whl: the product build plus diag 1 no dQ reduce-adds, 2 no
# tanh, 256 no tile reloads; the default kernel's SASS = main's): variant_split.py, each variant after 1.5 s idle,
# 3 s back to back the benchmark's way, the default first and last; nvidia-smi's SM clock / power / throttle reasons
# every 50 ms beside it (smi_join.py: per window, the SM cycles per call = ms x MHz).
# `OUT=DIR timeout 56 bash .carry/fp8b27/run2.sh` from the root of main's tree (carry: tools/hstu_dev/fp8b27_run/pack.sh DIR 1).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_fp8b27}; mkdir -p "$OUT"
C=$PWD/.carry/fp8b27
rm -rf /tmp/site_fp8b27
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b27 $C/whl/hstu_attn-*.whl 2>&1 \
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
echo "smi log started ($SECONDS s)"
DL=$(( $(date +%s) + 44 - SECONDS ))
(PYTHONPATH=/tmp/site_fp8b27 timeout $(( 47 - SECONDS )) python3 -P $C/variant_split.py $OUT --s 16384 \
    --diags 0,1,2,256,0 --idle 1.5 --window 3 --tail 1 --profile-first --deadline $DL 2>&1 | tee $OUT/split.log | grep -v "^| \|^|---")
echo "variant_split rc $? ($SECONDS s)"
kill $SMI 2> /dev/null
wait $SMI 2> /dev/null
echo "#### digest: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
grep "^| \|^|---\|^####" $OUT/split.log
timeout 4 python3 $C/smi_join.py $OUT --bin 1 > $OUT/smi_join.md
grep -A1 "^####\|^| burst\|^| sustained" $OUT/smi_join.md | grep -v "^| bin\|^--$" | cut -c1-200
gzip -f $OUT/smi.csv
echo "fp8b27 run 2 done at $SECONDS s"
