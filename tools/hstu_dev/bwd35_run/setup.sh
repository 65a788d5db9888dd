# bwd35's run scripts' common part (issue 39, session 32), sourced from the root of main's tree on the device:
# carry_setup.sh (OUT, R, C, main's wheel in /tmp/site_main, the branch's in /tmp/site_bwd35 when carried, GPU, PT,
# run_tests), left() (seconds to LIM), B21 (bwd21.py's timer), NCU, gpu_tests (the branch's test files, -v).
NAME=bwd35 BASE=main35
source "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh"
left() { echo $((${LIM:-48} - SECONDS)); }
B21=$C/bwd21.py
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
# (no branch wheel carried: the branch's site is main's)
ls $C/whl/hstu_attn-*.whl > /dev/null 2>&1 || { rm -rf /tmp/site_$NAME; ln -s /tmp/site_main /tmp/site_$NAME; }
gpu_tests() {
  local secs=$1
  shift
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
      --import-mode=importlib --tb=short --maxfail=3 -rfE "$@" > $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
}
