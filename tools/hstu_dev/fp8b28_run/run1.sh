#!/bin/bash
# fp8b28 run 1 (issue 36, session 25): the FP8 backward's 2-CTA cluster dQ sum (kFp8BwdPairDq: option bit 60,
# variant "pair_dq", diag 1073741824). First its tests (tests/hstu/test_fp8_bwd.py -k "pair_dq or refuses": against
# the fp64 emulation on every mask, against the default kernel (dk / dv bit-equal) on jagged batches and at S16K,
# the refusals), then burst / sustained at B16 S16K causal H4 D128 against the default kernel in the same process
# (the wheel's default kernel is main28's, SASS-identical with control words): fp8b27's variant_split.py, windows
# default, pair, default, pair (1.5 s idle, 3 s back to back the benchmark's way), nvidia-smi beside it.
# `OUT=DIR timeout 56 bash .carry/fp8b28/run1.sh` from the root of main's tree (carry:
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
(PYTHONPATH=/tmp/site_fp8b28 timeout 20 $PT tests/hstu/test_fp8_bwd.py -k "pair_dq or refuses_a_variant" \
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
DL=$(( $(date +%s) + 46 - SECONDS ))
P=1073741824
(PYTHONPATH=/tmp/site_fp8b28 timeout $(( 48 - SECONDS )) python3 -P $C/variant_split.py $OUT --s 16384 \
    --diags 0,$P,0,$P --idle 1.5 --window 3 --tail 1 --deadline $DL > $OUT/split.log 2>&1)
echo "variant_split rc $? ($SECONDS s)"
kill $SMI 2> /dev/null
wait $SMI 2> /dev/null
echo "#### digest: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8 | cut -c1-300
grep -v "^| \|^|---" $OUT/split.log | tail -4 | cut -c1-200
grep "^| \|^|---\|^####" $OUT/split.log
timeout 3 python3 $C/smi_join.py $OUT --bin 1 > $OUT/smi_join.md
grep -A1 "^####\|^| burst\|^| sustained" $OUT/smi_join.md | grep -v "^| bin\|^--$" | cut -c1-200
gzip -f $OUT/smi.csv
echo "fp8b28 run 1 done at $SECONDS s"
