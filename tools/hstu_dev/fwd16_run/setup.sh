# fwd16 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: strict mode,
# OUT, R (the tree), C (the carry folder), the branch's wheel in /tmp/site_fwd16 and main15's in /tmp/site_fwd16_main,
# GPU (name and clocks), T (fwd16_time.py), PT (pytest's command line).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_fwd16}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/fwd16
PIP="python3 -m pip install -q --no-deps --no-index --no-compile --target"
rm -rf /tmp/site_fwd16 /tmp/site_fwd16_main
$PIP /tmp/site_fwd16 $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
$PIP /tmp/site_fwd16_main $R/.carry/main15/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
T=$C/fwd16_time.py
PT="python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
# The digest's test part
digest_tests() {
  echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -10 | cut -c1-300
  grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
}
# run_tests TIMEOUT EXPR FILE...: the branch's test files (the carry's tree) under pytest -k EXPR, into tests.log
run_tests() {
  local t=$1 k=$2
  shift 2
  (cd $C/tree && PYTHONPATH=/tmp/site_fwd16 timeout $t $PT "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
