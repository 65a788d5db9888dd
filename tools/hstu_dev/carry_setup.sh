# The common setup of a helper's GPU run scripts (tools/hstu_dev/*_run/setup.sh source it with NAME, the helper's
# carry folder, and BASE, the lead's folder of main's wheels; the scripts run from the root of main's tree on the
# device, where this file travels in the carry folder): strict mode, OUT, R (the tree), C (the carry folder), main's
# hstu_attn wheel in /tmp/site_main (or BASE_SITE) and the branch's in /tmp/site_$NAME, GPU (name and clocks), PT
# (pytest's command line), digest_tests, run_tests, jag (with J, the benchmark script, set by the caller).
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_$NAME}
mkdir -p "$OUT"
C=$R/.carry/$NAME
# (BASE empty: no main's wheel, the branch's alone)
for site_whl in ${BASE:+"${BASE_SITE:-/tmp/site_main} $R/.carry/$BASE/whl"} "/tmp/site_$NAME $C/whl"; do
  set -- $site_whl
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 |
    grep -v WARN | tail -2
done
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | tail -12 | cut -c1-300
}
# run_tests TIMEOUT EXPR FILE...: test files (the carry's tree where it has them, else main's) under pytest -k EXPR
run_tests() {
  local t=$1 k=$2 d=$R
  shift 2
  [ -d $C/tree ] && d=$C/tree
  (cd $d && PYTHONPATH=/tmp/site_$NAME timeout $t $PT "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
# jag SITE LABEL TIMEOUT ARGS...: $J LABEL ARGS with SITE's wheel, appended to $OUT/time.log
jag() {
  local site=$1 label=$2 t=$3
  shift 3
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
