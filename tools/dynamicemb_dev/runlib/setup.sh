# The wheels and test helpers of the shared device-run library (sourced by runK.sh after, or instead of, common.sh:
# `. .carry/NAME/setup.sh`). Installs the dynamicemb wheels SITES names (run.conf; default "main self"): main =
# .carry/$BASE/whl (the lead's wheels of main) into /tmp/site_main, self = the carry's whl/ into /tmp/site_$NAME, and
# defines
#   PT                                  pytest's command line
#   run_tests TIMEOUT LAB EXPR FILE...  the carry's test files (tree/) under pytest -k EXPR with this branch's wheel,
#                                       ScoredHashTable._upsert_lab = LAB (upsert_lab_plugin); LAB "-": the class's
#                                       own (the default path); the log $OUT/${LOG:-tests}.log
#   digest_tests                        the summary lines of every $OUT/tests*.log
[ -n "${RUNLIB_COMMON:-}" ] || . "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export PYTHONUNBUFFERED=1
for site in ${SITES:-main self}; do
  case $site in
    main) dir=/tmp/site_main whl=$R/.carry/${BASE:?BASE (run.conf): the lead\'s folder of main\'s wheels}/whl ;;
    self) dir=/tmp/site_$NAME whl=$C/whl ;;
    *) echo "setup.sh: unknown site $site (main or self)" >&2; continue ;;
  esac
  rm -rf "$dir" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$dir" $whl/dynamicemb-*.whl 2>&1 |
    grep -v WARN | tail -2
done
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
digest_tests() {
  local f
  for f in $OUT/tests*.log; do
    [ -f "$f" ] || continue
    echo "# $(basename $f)"
    grep -E "FAILED|ERROR|passed|failed|rror|upsert_lab_plugin" $f 2>/dev/null | tail -8 | cut -c1-300
    tail -c 300 $f | grep -E "^[.sFE]+" | tail -1
  done
}
run_tests() {
  local t=$1 lab=$2 k=$3 log=${LOG:-tests}
  shift 3
  local opt="-p upsert_lab_plugin --upsert-lab $lab"
  [ "$lab" = "-" ] && opt=""
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree/tools/dynamicemb_dev timeout $t $PT $opt "$@" -k "$k" \
    >> $OUT/$log.log 2>&1)
  echo "run_tests $log lab $lab rc $? (124: time ran out; $(elapsed) s)"
}
