# fp8f20 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree (939d473): bwd15's
# (strict mode, OUT, C = .carry/fp8f20, left(), the branch's wheel in /tmp/site_fp8f20, gpu_tests SECONDS ARGS... on
# the branch's test files in $C/tree), bench (tools/hstu_dev/fp8_fwd_run.sh: $C/fp8_fwd_split.py, the branch's
# copy), and smi_log / smi_stop: the GPU's SM clock, temperature and power every 50 ms into $OUT/smi.csv while the
# benchmark runs (is a slow process the clocks or the kernel?), summarized per case by $C/smi_digest.py.
NAME=${NAME:-fp8f20} MAIN=${MAIN:-main19}  # (fp8f21's setup.sh sets its own)
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader) ($SECONDS s)"
source $R/tools/hstu_dev/fp8_fwd_run.sh
SMI_PID=
# (SMI_INSTANT=1, fp8f21: the instant power too, after the 1 s average, where this nvidia-smi has it; the fields
# named in smi.err's first line for fp8f21's smi_digest.py)
smi_log() {
  local why= inst=
  [ -n "${SMI_INSTANT:-}" ] && nvidia-smi --query-gpu=power.draw.instant --format=csv,noheader > /dev/null 2>&1 \
      && inst=,power.draw.instant
  for f in clocks_event_reasons.active clocks_throttle_reasons.active; do
    nvidia-smi --query-gpu=$f --format=csv,noheader > /dev/null 2>&1 && { why=,$f; break; }
  done
  echo "smi fields: timestamp,clocks.sm,temperature.gpu,power.draw$inst$why" > $OUT/smi.err
  nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw$inst$why --format=csv,noheader,nounits \
      -lms 50 > $OUT/smi.csv 2>> $OUT/smi.err &
  SMI_PID=$!
}
smi_stop() {
  [ -n "$SMI_PID" ] && kill $SMI_PID 2> /dev/null
  wait $SMI_PID 2> /dev/null
  python3 $C/smi_digest.py $OUT/smi.csv $OUT/bench.log
}
