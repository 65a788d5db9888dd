# fwd34 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd30_run's setup (carried
# here as setup30.sh beside carry_setup.sh, ncu_digest.py and jag/: main's wheel in /tmp/site_main, the branch's in
# /tmp/site_fwd34, GPU, run_tests, digest_tests, left, ncu_case) with J = fwd34_bench.py (variants default, ve =
# kernel_options(fwd_sm80_bm64=1), vep = fwd_sm80_bm64=2; jag SITE LABEL TIMEOUT ARGS appends its tables to
# $OUT/time.log).
NAME=fwd34 BASE=${BASE:-main34}
source "$(dirname "${BASH_SOURCE[0]}")"/setup30.sh
J=$C/jag/fwd34_bench.py
