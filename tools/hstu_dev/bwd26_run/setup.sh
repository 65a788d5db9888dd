# bwd26's run scripts' common part (issue 39, session 23), sourced from the root of main's tree on the device: runlib's
# common.sh (strict mode, OUT, R (the tree), C (the carry folder .carry/bwd26), left (seconds to the script's LIM,
# default 48), the branch's wheel in /tmp/site_bwd26 and main26's in /tmp/site_bwd26_main, GPU (name and clocks),
# gpu_tests (the branch's test files in $C/tree, -v, into $OUT/tests.log)), time_cfgs, digest.
NAME=bwd26 BASE=main26 BASE_SITE=/tmp/site_bwd26_main LIM=${LIM:-48}
RUNLIB_COMMON="$(dirname "${BASH_SOURCE[0]}")/common.sh"  # (the carry's, else main's tree's)
[ -f "$RUNLIB_COMMON" ] || RUNLIB_COMMON=$PWD/tools/hstu_dev/runlib/common.sh
source "$RUNLIB_COMMON"
B21=$C/bwd21.py  # (bwd21.py's timer and time80.py beside it in the carry folder)
# time_cfgs SECS MAIN_SECS "CFG..." SHAPE...: bwd21.py's timer (interleaved rounds, median of 5): the branch's cfgs
# and FA2, then main26's wheel (cfg 0) in its own process, into $OUT/time.log.
time_cfgs() {
  local secs=$1 msecs=$2 cfgs=$3
  shift 3
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $B21 time --label $NAME --cfgs $cfgs --reps 5 \
      --impls ours fa2 --shapes "$@" > $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
  local m=$(( $(left) > msecs ? msecs : $(left) > 2 ? $(left) - 1 : 1 ))
  PYTHONPATH=/tmp/site_${NAME}_main timeout $m python3 -P $B21 time --label main26 --cfgs 0 --reps 5 \
      --impls ours --shapes "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
digest() {
  echo
  echo "################ DIGEST ($GPU; done at $SECONDS s)"
  echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-200 | tail -12
  echo "#### time (ms; $1)"
  cut -c1-250 $OUT/time.log 2>/dev/null
  [ -f $OUT/san.log ] && { echo "#### sanitizer"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|rc |cfg |azard" $OUT/san.log | head -12; }
  true
}
