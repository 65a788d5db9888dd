# d256f37 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd30_run's setup (carried
# here as setup30.sh beside carry_setup.sh, ncu_digest.py and jag/: main37's wheel in /tmp/site_main, the branch's in
# /tmp/site_d256f37, GPU, run_tests, digest_tests, left, ncu_case) with J = d256_bench37.py (variants default, g1 =
# kernel_options(fwd_sm80_cfg=13), g3 = 14; jag SITE LABEL TIMEOUT ARGS appends its tables to $OUT/time.log) and
# d256f36_run's ncu36 / ncu_grep (carried as ncu36.sh).
NAME=d256f37 BASE=${BASE:-main37}
source "$(dirname "${BASH_SOURCE[0]}")"/setup30.sh
J=$C/jag/d256_bench37.py
source "$(dirname "${BASH_SOURCE[0]}")"/ncu36.sh
