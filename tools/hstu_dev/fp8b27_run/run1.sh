#!/bin/bash
# fp8b27 run 1 (issue 36, session 24): where the FP8 backward's 614 -> 700 TFLOP/s goes: main's wheel
# (.carry/main27/whl), the op per kernel (torch.profiler, CUDA activity) from a cool GPU to the sustained state,
# B16 S4K then B16 S16K (clock_split.py), with nvidia-smi's SM clock / power / throttle reasons every 50 ms beside it
# (smi_join.py: per 0.5 s bin, and the main kernel's SM cycles per call = ms x MHz). No build of the branch needed.
# `OUT=DIR timeout 56 bash .carry/fp8b27/run1.sh` from the root of main's tree (carry: tools/hstu_dev/fp8b27_run/pack.sh).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_fp8b27}; mkdir -p "$OUT"
C=$PWD/.carry/fp8b27
rm -rf /tmp/site_fp8b27_main
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_fp8b27_main \
    .carry/main27/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
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
DL=$(( $(date +%s) + 42 - SECONDS ))
PYTHONPATH=/tmp/site_fp8b27_main timeout $(( 46 - SECONDS )) python3 -P $C/clock_split.py $OUT --idle 2 --sustain4k 3 \
    --sustain16k 7 --bf16 3 --deadline $DL 2>&1 | tee $OUT/split.log | grep -v "^| B\|^| bf16\|^|---\|^| case"
echo "clock_split rc ${PIPESTATUS[0]} ($SECONDS s)"
kill $SMI 2> /dev/null
wait $SMI 2> /dev/null
echo "#### digest: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
grep "^| \|^|---" $OUT/split.log
timeout 4 python3 $C/smi_join.py $OUT --bin 0.5 | tee $OUT/smi_join.md | cut -c1-220
gzip -f $OUT/smi.csv
echo "fp8b27 run 1 done at $SECONDS s"
