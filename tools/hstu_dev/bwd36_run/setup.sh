# bwd36's run scripts' common part (issue 39, session 33), sourced from the root of main's tree on the device:
# carry_setup.sh (OUT, R, C, main's wheel in /tmp/site_main, the branch's in /tmp/site_bwd36, GPU, PT, run_tests),
# left() (seconds to LIM), T36 (the timer), gpu_tests (the branch's test files, -v).
NAME=bwd36 BASE=main36
source "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh"
left() { echo $((${LIM:-48} - SECONDS)); }
T36=$C/t36.py
gpu_tests() {
  local secs=$1
  shift
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
      --import-mode=importlib --tb=short --maxfail=3 -rfE "$@" > $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
}
