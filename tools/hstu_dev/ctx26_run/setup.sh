# ctx26 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: OUT, R, C, main's
# hstu_attn wheel (.carry/main26/whl) in /tmp/site_main and the branch's (.carry/ctx26/whl, where carried) in
# /tmp/site_ctx26, GPU, J (ctx26_bench.py beside fwd17_jag.py), left (seconds left of the run's 50), bench, run_tests.
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_ctx26}
mkdir -p "$OUT"
C=$R/.carry/ctx26
for site_whl in "/tmp/site_main $R/.carry/main26/whl" "/tmp/site_ctx26 $C/whl"; do
  set -- $site_whl
  ls $2/hstu_attn-*.whl > /dev/null 2>&1 || continue
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 |
    grep -v WARN | tail -2
done
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
J=$C/ctx26_bench.py
left() { echo $(( 48 - SECONDS )); }
# bench SITE LABEL TIMEOUT ARGS...: ctx26_bench.py LABEL ARGS with SITE's wheel, appended to $OUT/time.log
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
# run_tests TIMEOUT EXPR FILE...: the carried test files (.carry/ctx26/tree) under pytest -k EXPR, the branch's wheel
run_tests() {
  local t=$1 k=$2
  shift 2
  (cd $C/tree && PYTHONPATH=/tmp/site_ctx26 timeout $t $PT "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
digest_tests() {
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | tail -12 | cut -c1-300
}
