# bwd41's run scripts' common part (issue 39, session 38), sourced from the root of main's tree on the device:
# the branch's wheel unpacked from its xz (xzwheel.py), then runlib's common.sh (OUT, R, C, the branch's wheel in
# /tmp/site_bwd41, GPU, PT, run_tests, left, NCU), T41 (the timer, carried beside it with runlib's bwdtime.py). No
# main's wheel: main's D = 128 loop is bwd_sm80_cfg=14 of the branch's wheel (SASS-identical to main d7a8eec6's
# kernels, checked here).
NAME=bwd41 BASE= LIM=${LIM:-52}
_d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$_d/common.sh" > /tmp/bwd41_setup.log 2>&1
grep -iE "error|warn" /tmp/bwd41_setup.log | grep -v "$C/whl" | head -3
T41=$C/t41.py
