# drab38's run scripts' common part (issue 39, session 35: drab's zeros by bulk copies), sourced by runK.sh from the
# root of main's tree on the device: runlib's common.sh (carried beside it with carry_setup.sh: main38's hstu_attn
# wheel in /tmp/site_main, the branch's in /tmp/site_drab38; GPU, PT, run_tests, digest_tests, left (seconds left of
# LIM), bench, NCU, ncu_bench, ncu_times), J (drab38_bench.py beside drab_bench.py and fwd17_jag.py).
NAME=drab38 BASE=main38 LIM=${LIM:-53}
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
J=$C/drab38_bench.py
