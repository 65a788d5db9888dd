# rab35's run scripts' common part (issue 39, session 32), sourced by runK.sh from the root of main's tree on the
# device: runlib's common.sh (carried beside it with carry_setup.sh: main35's hstu_attn wheel in /tmp/site_main, the
# branch's, where carried, in /tmp/site_rab35; GPU, PT, run_tests, digest_tests, left (seconds left of LIM), bench,
# NCU), J (rab35_bench.py beside sm80_case_bench.py and fwd17_jag.py).
NAME=rab35 BASE=main35 LIM=${LIM:-50}
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
ls $C/whl/hstu_attn-*.whl > /dev/null 2>&1 || { rm -rf /tmp/site_$NAME; ln -s /tmp/site_main /tmp/site_$NAME; }
J=$C/rab35_bench.py
