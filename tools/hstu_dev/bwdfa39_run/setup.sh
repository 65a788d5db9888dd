# bwdfa39's run scripts' common part (issue 39, session 36), sourced from the root of main's tree on the device:
# runlib's common.sh (carried beside it with carry_setup.sh: OUT, R, C, main's wheel in /tmp/site_main, the branch's in
# /tmp/site_bwdfa39 (main's when the carry has no wheel: run 1), GPU, PT, run_tests, left (seconds to LIM), NCU,
# gpu_tests (the branch's test files, -v)), T39 (the timer), PEER (NVIDIA's Ampere HSTU module, carried from peer35).
NAME=bwdfa39 BASE=main39 LIM=${LIM:-48}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" > /tmp/bwdfa39_setup.log 2>&1
grep -iE "error|warn" /tmp/bwdfa39_setup.log | grep -v "$C/whl" | head -3
[ -d /tmp/site_$NAME/hstu_attn ] || { rm -rf /tmp/site_$NAME; ln -s /tmp/site_main /tmp/site_$NAME; echo "(branch = main's wheel)"; }
T39=$C/t39.py
PEER=$C/peer
PEER_ARG=--peer
ls $PEER/hstu_attn_2_cuda*.so > /dev/null 2>&1 || { PEER=/nonexistent; PEER_ARG=; }
