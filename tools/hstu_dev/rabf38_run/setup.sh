# rabf38's run scripts' common part (issue 39, session 35), sourced by runK.sh from the root of main's tree on the
# device: runlib's common.sh (carried beside it with carry_setup.sh: main38's hstu_attn wheel in /tmp/site_main, the
# branch's in /tmp/site_rabf38; GPU, PT, run_tests, digest_tests, left (seconds left of LIM), bench, NCU, ncu_bench
# (its timeout: all the time left), ncu_metrics), J (sm80_case_bench.py beside fwd17_jag.py; its per-case lines
# tagged rabf38).
NAME=rabf38 BASE=main38 LIM=${LIM:-50} NCU_SPARE=0 BENCH_OPTS="--tag rabf38"
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
J=$C/sm80_case_bench.py
