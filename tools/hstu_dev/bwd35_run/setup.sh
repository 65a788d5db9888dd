# bwd35's run scripts' common part (issue 39, session 32), sourced from the root of main's tree on the device:
# runlib's common.sh (carried beside it with carry_setup.sh: OUT, R, C, main's wheel in /tmp/site_main, the branch's
# in /tmp/site_bwd35 when carried, GPU, PT, run_tests, left (seconds to LIM), NCU, gpu_tests (the branch's test
# files, -v)), B21 (bwd21.py's timer).
NAME=bwd35 BASE=main35 LIM=${LIM:-48}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
B21=$C/bwd21.py
# (no branch wheel carried: the branch's site is main's)
ls $C/whl/hstu_attn-*.whl > /dev/null 2>&1 || { rm -rf /tmp/site_$NAME; ln -s /tmp/site_main /tmp/site_$NAME; }
