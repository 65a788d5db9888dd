# fp8f35 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fp8f31's (carried here as
# setup_f31.sh, with fp8b29's as setup_b29.sh and the common carry setup): main35's hstu_attn wheel in /tmp/site_main
# and this branch's (where the carry has one) in /tmp/site_fp8f35, GPU, PT, run_tests, digest_tests, smi_on /
# smi_off (nvidia-smi every 50 ms into $OUT/smi.csv.gz), bench (fp8_fwd_split.py), digest; and methods: the
# branch's benchmarks/hstu_attention.py (carried under tree/) --fp8 --method with a given site's wheel.
NAME=fp8f35 BASE=main35
source "$(dirname "${BASH_SOURCE[0]}")"/setup_f31.sh
# methods SITE LOG TIMEOUT ARGS...: tree/benchmarks/hstu_attention.py --fp8 ARGS with SITE's wheel into $OUT/LOG
methods() {
  local site=$1 log=$2 t=$3
  shift 3
  PYTHONPATH=$site timeout $t python3 -P $C/tree/benchmarks/hstu_attention.py --fp8 "$@" > $OUT/$log 2>&1
  echo "methods $log rc $? ($SECONDS s)"
}
# methods_digest LOG...: each log's summary table (the rows after the last table header)
methods_digest() {
  for f in "$@"; do
    echo "-- $f:"
    grep -E "^\| B16 S16K D[0-9]+ \| (fa3|do_bench|sustained|ramp, [a-z]+ bucket) \||rror" $OUT/$f | cut -c1-150
  done
}
