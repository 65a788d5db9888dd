# bwd28's run scripts' common part (issue 39, session 25), sourced from the root of main's tree on the device: runlib's
# common.sh (OUT, R (the tree), C (the carry folder .carry/bwd28), left (seconds to the script's LIM, default 48), the
# branch's wheel in /tmp/site_bwd28 (and with MAIN=1 main28's in /tmp/site_bwd28_main), GPU (name and clocks),
# gpu_tests (the branch's test files in $C/tree, -v, into $OUT/tests.log)), digest.
# A later helper sources it with NAME (its carry folder) and BASE (main's wheels' folder, with MAIN=1) set.
NAME=${NAME:-bwd28} LIM=${LIM:-48}
BASE_SITE=/tmp/site_${NAME}_main BASE=$([ "${MAIN:-0}" = 1 ] && echo ${BASE:-main28})  # (empty: the branch's alone)
RUNLIB_COMMON="$(dirname "${BASH_SOURCE[0]}")/common.sh"  # (the carry's, else main's tree's)
[ -f "$RUNLIB_COMMON" ] || RUNLIB_COMMON=$PWD/tools/hstu_dev/runlib/common.sh
source "$RUNLIB_COMMON"
B21=$C/bwd21.py  # (bwd21.py's timer and time80.py beside it in the carry folder)
digest() {
  echo
  echo "################ DIGEST ($GPU; done at $SECONDS s)"
  echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-200 | tail -12
  echo "#### time (ms; $1)"
  cut -c1-250 $OUT/time.log 2>/dev/null
  [ -f $OUT/count.log ] && { echo "#### count"; cut -c1-300 $OUT/count.log; }
  true
}
