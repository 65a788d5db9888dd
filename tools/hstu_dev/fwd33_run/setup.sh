# fwd33 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd30_run's setup (carried
# here as setup30.sh beside carry_setup.sh, ncu_digest.py and jag/: main's wheel in /tmp/site_main, the branch's in
# /tmp/site_fwd33, GPU, run_tests, digest_tests, left, ncu_case) with J = fwd33_bench.py (variants default, pers =
# kernel_options(fwd_sm80_bm64=1), c1, c3, c5; jag SITE LABEL TIMEOUT ARGS appends its tables to $OUT/time.log).
NAME=fwd33 BASE=${BASE:-main33}
source "$(dirname "${BASH_SOURCE[0]}")"/setup30.sh
J=$C/jag/fwd33_bench.py
