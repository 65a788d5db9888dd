# bwd28's run scripts' common part (issue 39, session 25), sourced from the root of main's tree on the device: OUT,
# R (the tree), C (the carry folder .carry/bwd28), left() (seconds to the script's LIM), the branch's wheel in
# /tmp/site_bwd28 (and with MAIN=1 main28's in /tmp/site_bwd28_main), GPU (name and clocks), gpu_tests, digest.
# A later helper sources it with NAME (its carry folder) and BASE (main's wheels' folder) set.
set -u
export PYTHONUNBUFFERED=1
NAME=${NAME:-bwd28}
OUT=${OUT:-/tmp/o_$NAME}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/$NAME
left() { echo $((${LIM:-48} - SECONDS)); }
WHEELS="/tmp/site_$NAME:$C/whl"
[ "${MAIN:-0}" = 1 ] && WHEELS="$WHEELS /tmp/site_${NAME}_main:$R/.carry/${BASE:-main28}/whl"
for w in $WHEELS; do
  rm -rf ${w%%:*} && python3 -m pip install -q --no-deps --no-index --no-compile --target ${w%%:*} \
      ${w#*:}/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
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
