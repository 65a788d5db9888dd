# fwd40's run scripts' common part (issue 39, session 37), sourced from the root of main's tree on the device:
# runlib's common.sh (carried beside it with carry_setup.sh: OUT, R, C, main's wheel in /tmp/site_main, the branch's in
# /tmp/site_fwd40 (main's when the carry has no wheel: run 1), GPU, left, NCU), T40 (the timer).
NAME=fwd40 BASE=main40 LIM=${LIM:-52}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" > /tmp/fwd40_setup.log 2>&1
grep -iE "error|warn" /tmp/fwd40_setup.log | grep -v "$C/whl" | head -3
[ -d /tmp/site_$NAME/hstu_attn ] || { rm -rf /tmp/site_$NAME; ln -s /tmp/site_main /tmp/site_$NAME; echo "(branch = main's wheel)"; }
T40=$C/t40.py
