# rab40's run scripts' common part (issue 39, session 37), sourced by runK.sh from the root of main's tree on the
# device: runlib's common.sh (carried beside it with carry_setup.sh: main40's hstu_attn wheel in /tmp/site_main, the
# branch's in /tmp/site_rab40; GPU, PT, run_tests, digest_tests, left, bench, NCU, ncu_bench, ncu_metrics), J
# (sm80_case_bench.py beside fwd17_jag.py; its per-case lines tagged rab40).
NAME=rab40 BASE=main40 LIM=${LIM:-50} NCU_SPARE=0 BENCH_OPTS="--tag rab40"
source "$(dirname "${BASH_SOURCE[0]}")"/common.sh
J=$C/sm80_case_bench.py
