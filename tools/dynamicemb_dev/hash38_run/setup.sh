# Sourced by hash38's runK.sh when they run GPU tests or table_ab.py: this branch's dynamicemb wheel (.carry/hash38/whl)
# in /tmp/site_hash38 (main's path is a lab value of the same wheel, so main's wheel is not installed); run_tests as
# tools/hstu_dev/carry_setup.sh.
NAME=hash38 BASE=main38
export PYTHONUNBUFFERED=1 R=$PWD
C=$R/.carry/$NAME
for site_whl in "/tmp/site_$NAME $C/whl"; do
  set -- $site_whl
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/dynamicemb-*.whl 2>&1 |
    grep -v WARN | tail -2
done
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  grep -E "FAILED|ERROR|passed|failed|rror|upsert_lab_plugin" $OUT/tests.log 2>/dev/null | tail -14 | cut -c1-300
}
# run_tests TIMEOUT LAB EXPR FILE...: the carry's test files under pytest -k EXPR with ScoredHashTable._upsert_lab = LAB
run_tests() {
  local t=$1 lab=$2 k=$3
  shift 3
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree/tools/dynamicemb_dev timeout $t $PT -p upsert_lab_plugin \
    --upsert-lab $lab "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "run_tests lab $lab rc $? (124: time ran out; $(( $(date +%s) - t0 )) s)"
}
