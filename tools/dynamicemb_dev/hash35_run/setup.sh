# Sourced by hash35's run3.sh (GPU tests and table_ab): this branch's dynamicemb wheel in /tmp/site_hash35 (main's
# path is its lab value 1, in the same process); PT (pytest's command line) and run_tests.
NAME=hash35
export PYTHONUNBUFFERED=1 R=$PWD
C=$R/.carry/$NAME
rm -rf /tmp/site_$NAME && python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$NAME \
  $C/whl/dynamicemb-*.whl 2>&1 | grep -v WARN | tail -2
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
# run_tests TIMEOUT LAB LOG EXPR FILE...: the carry's test files under pytest -k EXPR with _upsert_lab = LAB
run_tests() {
  local t=$1 lab=$2 log=$3 k=$4
  shift 4
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree/tools/dynamicemb_dev timeout $t $PT -p upsert_lab_plugin \
    --upsert-lab $lab "$@" -k "$k" > $OUT/$log 2>&1)
  echo "$log rc $? (124: time ran out)"
}
digest_tests() {
  local f
  for f in "$@"; do
    echo "-- $f"
    grep -E "FAILED|ERROR|passed|failed|rror" $OUT/$f 2>/dev/null | tail -6 | cut -c1-300
  done
}
