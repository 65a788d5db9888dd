# fp8b29 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (tools/hstu_dev/carry_setup.sh, carried beside this file: main29's hstu_attn wheel in /tmp/site_main, the branch's
# in /tmp/site_fp8b29, GPU, PT, run_tests, digest_tests), and smi_on / smi_off: nvidia-smi's SM clock, power and
# throttle reasons every 50 ms into $OUT/smi.csv beside fp8b27's variant_split.py (carried here; smi_join.py joins
# them off the device).
NAME=${NAME:-fp8b29} BASE=${BASE:-main29}
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
echo "GPU: $GPU, $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
SMI_PID=
smi_on() {
  local why=
  for f in clocks_event_reasons.active clocks_throttle_reasons.active; do
    nvidia-smi --query-gpu=$f --format=csv,noheader > /dev/null 2>&1 && { why=,$f; break; }
  done
  echo "smi fields: timestamp,clocks.sm,temperature.gpu,power.draw$why" > $OUT/smi.err
  nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw$why --format=csv,noheader,nounits -lms 50 \
      > $OUT/smi.csv 2>> $OUT/smi.err &
  SMI_PID=$!
}
smi_off() {
  [ -n "$SMI_PID" ] && kill $SMI_PID 2> /dev/null
  wait $SMI_PID 2> /dev/null
  gzip -f $OUT/smi.csv
}
# split DEADLINE_S DIAGS ARGS...: variant_split.py (the branch's wheel) at B16 S16K until $SECONDS = DEADLINE_S
split() {
  local end=$1 diags=$2
  shift 2
  (PYTHONPATH=/tmp/site_$NAME timeout $(( end + 2 - SECONDS )) python3 -P $C/variant_split.py $OUT --diags $diags \
      --deadline $(( $(date +%s) + end - SECONDS )) "$@" > $OUT/split.log 2>&1)
  echo "variant_split rc $? ($SECONDS s)"
}
DQ_BF16=134217728  # kFp8BwdDqBf16 (option bit 60 dq_bf16): the op's diag
DQ_H3=402653184  # kFp8BwdDqBf16 | kFp8BwdDqBf16Held3 (run 2's lab wheel)
