# fp8f20 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree (939d473): bwd15's
# (strict mode, OUT, C = .carry/fp8f20, left(), the branch's wheel in /tmp/site_fp8f20, gpu_tests SECONDS ARGS... on
# the branch's test files in $C/tree), bench (tools/hstu_dev/fp8_fwd_run.sh: $C/fp8_fwd_split.py, the branch's
# copy), and smi_log / smi_stop: the GPU's SM clock, temperature and power every 50 ms into $OUT/smi.csv while the
# benchmark runs (is a slow process the clocks or the kernel?), summarized per case by $C/smi_digest.py.
NAME=fp8f20 MAIN=main19
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader) ($SECONDS s)"
source $R/tools/hstu_dev/fp8_fwd_run.sh
SMI_PID=
smi_log() {
  local why=
  for f in clocks_event_reasons.active clocks_throttle_reasons.active; do
    nvidia-smi --query-gpu=$f --format=csv,noheader > /dev/null 2>&1 && { why=,$f; break; }
  done
  nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw$why --format=csv,noheader,nounits -lms 50 \
      > $OUT/smi.csv 2> $OUT/smi.err &
  SMI_PID=$!
}
smi_stop() {
  [ -n "$SMI_PID" ] && kill $SMI_PID 2> /dev/null
  wait $SMI_PID 2> /dev/null
  python3 $C/smi_digest.py $OUT/smi.csv $OUT/bench.log
}
