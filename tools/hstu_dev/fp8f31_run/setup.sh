# fp8f31 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fp8b29's (carried here as
# setup_b29.sh: the common carry setup with main31's hstu_attn wheel in /tmp/site_main and this branch's in
# /tmp/site_fp8f31, GPU, PT, run_tests, digest_tests; smi_on / smi_off, the nvidia-smi log into $OUT/smi.csv.gz),
# and bench: fp8_fwd_split.py (carried) with the branch's wheel beside that log.
NAME=${NAME:-fp8f31} BASE=${BASE:-main31}
source "$(dirname "${BASH_SOURCE[0]}")"/setup_b29.sh
# bench DEADLINE_S ARGS...: $C/fp8_fwd_split.py ARGS until $SECONDS = DEADLINE_S, into $OUT/bench.log.
bench() {
  local end=$1
  shift
  smi_on
  PYTHONPATH=/tmp/site_$NAME timeout $(( end - SECONDS )) python3 -P $C/fp8_fwd_split.py "$@" > $OUT/bench.log 2>&1
  echo "bench rc $? ($SECONDS s)"
  smi_off
}
# digest: the GPU, the tests' summary, the bench's tables.
digest() {
  echo "#### digest: $GPU"
  digest_tests
  grep -E "^\||^\(case|^sustained|rror" $OUT/bench.log | cut -c1-200
}
