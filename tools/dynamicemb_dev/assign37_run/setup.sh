# Sourced by assign37's runK.sh when they run GPU tests or table_ab.py: main's dynamicemb wheel (.carry/main37/whl)
# in /tmp/site_main, this branch's (.carry/assign37/whl) in /tmp/site_assign37, and
#   run_tests TIMEOUT LAB EXPR FILE...   the carry's test files under pytest -k EXPR, ScoredHashTable._upsert_lab = LAB
#   digest_tests                         the tests' summary lines
NAME=assign37 BASE=main37
export PYTHONUNBUFFERED=1 R=$PWD
C=$R/.carry/$NAME
for site_whl in "/tmp/site_main $R/.carry/$BASE/whl" "/tmp/site_$NAME $C/whl"; do
  set -- $site_whl
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/dynamicemb-*.whl 2>&1 |
    grep -v WARN | tail -2
done
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  local f
  for f in $OUT/tests*.log; do
    echo "# $(basename $f)"
    grep -E "FAILED|ERROR|passed|failed|rror|upsert_lab_plugin" $f 2>/dev/null | tail -8 | cut -c1-300
    tail -c 300 $f | grep -E "^[.sFE]+" | tail -1
  done
}
# LAB "-": the class's own _upsert_lab (the default path); LOG: the log's name (tests.log)
run_tests() {
  local t=$1 lab=$2 k=$3 log=${LOG:-tests}
  shift 3
  local opt="-p upsert_lab_plugin --upsert-lab $lab"
  [ "$lab" = "-" ] && opt=""
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree/tools/dynamicemb_dev timeout $t $PT $opt "$@" -k "$k" \
    >> $OUT/$log.log 2>&1)
  echo "run_tests $log lab $lab rc $? (124: time ran out; $(( $(date +%s) - t0 )) s)"
}
