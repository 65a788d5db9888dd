# bwd43's run scripts' common part (issue 39, session 40), sourced from the root of main's tree on the device: the
# branch's wheel unpacked from its xz (xzwheel.py), then runlib's common.sh (OUT, R, C, the branch's wheel in
# /tmp/site_bwd43, GPU, PT, run_tests, left), T43 (the timer, carried beside it with runlib's bwdtime.py). No main's
# wheel: main's D = 64 loop is bwd_sm80_cfg=6 of the branch's wheel (the same template arguments as main's kernels).
NAME=bwd43 BASE= LIM=${LIM:-92}
_d=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$_d/common.sh" > /tmp/bwd43_setup.log 2>&1
grep -iE "error|warn" /tmp/bwd43_setup.log | grep -v "$C/whl" | head -3
T43=$C/t43.py
