# rabf37's run scripts' common part (issue 39, session 34), sourced by runK.sh from the root of main's tree on the
# device: runlib's common.sh (carried beside it with carry_setup.sh: main37's hstu_attn wheel in /tmp/site_main, the
# branch's in /tmp/site_rabf37; GPU, PT, run_tests, digest_tests, left (seconds left of LIM), bench, NCU, ncu_bench
# (its timeout: all the time left), ncu_metrics), J (rab35_bench.py beside sm80_case_bench.py and fwd17_jag.py).
NAME=rabf37 BASE=main37 LIM=${LIM:-50} NCU_SPARE=0
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
J=$C/rab35_bench.py
