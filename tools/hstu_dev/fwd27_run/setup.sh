# fwd27 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (tools/hstu_dev/carry_setup.sh, carried beside this file: main27's hstu_attn wheel in /tmp/site_main, the branch's
# in /tmp/site_fwd27, GPU, run_tests, digest_tests), J = fwd27_bench.py (carried in jag/ beside fwd17_jag.py).
NAME=${NAME:-fwd27} BASE=${BASE:-main27}
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/jag/fwd27_bench.py
T=tests/hstu/test_sm80_forward_gpu.py
left() { echo $(( 46 - SECONDS )); }
# bench SITE LABEL TIMEOUT ARGS...: fwd27_bench.py with SITE's wheel, appended to $OUT/time.log
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
  echo "#### time (main27 = main 78423b0's wheel, own process first; fwd27 = the branch's; sm90=False; alpha D^-1/2;"
  echo "#### FA2 = torch's flash SDPA; run 1's silu n = kernel_options(fwd_sm80_silu=n) of 55adb13: 1 / 2 half / all"
  echo "#### of P in half2, 3 no MUFU (WRONG outputs, timing only))"
  grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | cut -c1-250
}
