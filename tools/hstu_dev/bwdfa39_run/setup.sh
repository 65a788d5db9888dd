# bwdfa39's run scripts' common part (issue 39, session 36), sourced from the root of main's tree on the device:
# carry_setup.sh (OUT, R, C, main's wheel in /tmp/site_main, the branch's in /tmp/site_bwdfa39 (main's when the
# carry has no wheel: run 1), GPU, PT, run_tests), left() (seconds to LIM), T39 (the timer), PEER (NVIDIA's Ampere
# HSTU module, carried from peer35), NCU, gpu_tests (the branch's test files, -v).
NAME=bwdfa39 BASE=main39
source "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh" > /tmp/bwdfa39_setup.log 2>&1
grep -iE "error|warn" /tmp/bwdfa39_setup.log | grep -v "$C/whl" | head -3
[ -d /tmp/site_$NAME/hstu_attn ] || { rm -rf /tmp/site_$NAME; ln -s /tmp/site_main /tmp/site_$NAME; echo "(branch = main's wheel)"; }
left() { echo $((${LIM:-48} - SECONDS)); }
T39=$C/t39.py
PEER=$C/peer
PEER_ARG=--peer
ls $PEER/hstu_attn_2_cuda*.so > /dev/null 2>&1 || { PEER=/nonexistent; PEER_ARG=; }
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
gpu_tests() {
  local secs=$1
  shift
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
      --import-mode=importlib --tb=short --maxfail=3 -rfE "$@" > $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
}
