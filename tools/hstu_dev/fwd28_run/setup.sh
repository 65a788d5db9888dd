# fwd28 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (tools/hstu_dev/carry_setup.sh, carried beside this file: main28's hstu_attn wheel in /tmp/site_main, the branch's
# in /tmp/site_fwd28, GPU, run_tests, digest_tests), J = fwd28_bench.py (carried in jag/ beside fwd17_jag.py).
NAME=${NAME:-fwd28} BASE=${BASE:-main28}
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/jag/fwd28_bench.py
T=tests/hstu/test_sm80_forward_gpu.py
left() { echo $(( 46 - SECONDS )); }
# bench SITE LABEL TIMEOUT ARGS...: fwd28_bench.py with SITE's wheel, appended to $OUT/time.log
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
digest_verbose() {
  grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
  grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
  digest_tests
}
digest_time() {
  echo "#### time (main28 = main 5feb2e0's wheel, own process; fwd28 = the branch's; sm90=False; alpha D^-1/2; run 1:"
  echo "#### noqs = fwd_sm80_qscale=False (main's kernel), cfg5 Q scaled with Q's copy late; run 2: cfg3 = main's pairs,"
  echo "#### cfg5 = the Q-early pairs forced; FA2 = torch's flash SDPA)"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
