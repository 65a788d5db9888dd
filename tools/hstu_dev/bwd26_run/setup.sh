# bwd26's run scripts' common part (issue 39, session 23), sourced from the root of main's tree on the device: strict
# mode, OUT, R (the tree), C (the carry folder .carry/bwd26), left() (seconds to the script's LIM), the branch's
# wheel in /tmp/site_bwd26 and main26's in /tmp/site_bwd26_main, GPU (name and clocks), gpu_tests, time_cfgs, digest.
set -u
export PYTHONUNBUFFERED=1
NAME=bwd26
OUT=${OUT:-/tmp/o_$NAME}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/$NAME
left() { echo $((${LIM:-48} - SECONDS)); }
for w in "/tmp/site_$NAME $C/whl" "/tmp/site_${NAME}_main $R/.carry/main26/whl"; do
  set -- $w
  rm -rf $1 && python3 -m pip install -q --no-deps --no-index --no-compile --target $1 $2/hstu_attn-*.whl 2>&1 |
    grep -v WARN | tail -2
done
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
B21=$C/bwd21.py  # (bwd21.py's timer and time80.py beside it in the carry folder)
# gpu_tests SECONDS PYTEST_ARGS...: the branch's test files ($C/tree) with the branch's wheel, -v, into
# $OUT/tests.log.
gpu_tests() {
  local secs=$1
  shift
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
      --import-mode=importlib --tb=short --maxfail=3 -rfE "$@" > $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
}
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
