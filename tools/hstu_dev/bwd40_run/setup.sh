# bwd40's run scripts' common part (issue 39, session 37), sourced from the root of main's tree on the device:
# runlib's common.sh (OUT, R, C, main40's wheel in /tmp/site_main, the branch's in /tmp/site_bwd40, GPU, PT,
# run_tests, left, NCU), T39 (bwdfa39's timer, carried beside it).
NAME=bwd40 BASE=main40 LIM=${LIM:-52}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" > /tmp/bwd40_setup.log 2>&1
grep -iE "error|warn" /tmp/bwd40_setup.log | grep -v "$C/whl" | head -3
T39=$C/t39.py
