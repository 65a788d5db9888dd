# drab37's run scripts' common part (issue 39, session 34: drab without the op's zero fill), sourced by runK.sh from
# the root of main's tree on the device: runlib's common.sh (carried beside it with carry_setup.sh: main37's hstu_attn
# wheel in /tmp/site_main, the branch's in /tmp/site_drab37; GPU, PT, run_tests, digest_tests, left (seconds left of
# LIM), bench, NCU, ncu_bench, ncu_times), J (drab37_bench.py beside drab_bench.py and fwd17_jag.py).
NAME=drab37 BASE=main37 LIM=${LIM:-53}
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
J=$C/drab37_bench.py
