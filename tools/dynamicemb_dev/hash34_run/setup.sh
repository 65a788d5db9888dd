# Sourced by hash34's runK.sh (GPU tests and table_ab): main's dynamicemb wheel (.carry/main34/whl) in /tmp/site_main,
# this branch's in /tmp/site_hash34; PT (pytest's command line) and run_tests as tools/hstu_dev/carry_setup.sh.
set -u
NAME=hash34 BASE=main34
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_$NAME}
mkdir -p "$OUT"
C=$R/.carry/$NAME
for site_whl in "/tmp/site_main $R/.carry/$BASE/whl" "/tmp/site_$NAME $C/whl"; do
  set -- $site_whl
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/dynamicemb-*.whl 2>&1 |
    grep -v WARN | tail -2
done
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | tail -12 | cut -c1-300
}
# run_tests TIMEOUT LAB EXPR FILE...: the carry's test files under pytest -k EXPR with _upsert_lab = LAB
run_tests() {
  local t=$1 lab=$2 k=$3
  shift 3
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree/tools/dynamicemb_dev timeout $t $PT -p upsert_lab_plugin \
    --upsert-lab $lab "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
