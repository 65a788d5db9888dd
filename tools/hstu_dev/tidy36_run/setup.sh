# tidy36's run scripts' common part (session 33: second-reading tidy, no behaviour change intended), sourced by runK.sh
# from the root of main's tree on the device: carry_setup.sh (carried beside it: main36's hstu_attn wheel in
# /tmp/site_main, the branch's in /tmp/site_tidy36; GPU, PT), tst (a pytest process of its own, in the background,
# its log $OUT/tests_LABEL.log), bits (bitcmp.py under both wheels, then the comparison).
NAME=tidy36 BASE=main36
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
# tst LABEL TIMEOUT EXPR FILE...: pytest -k EXPR on the carry's tree copy of FILE..., the branch's wheel
tst() {
  local label=$1 t=$2 k=$3
  shift 3
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $t $PT "$@" -k "$k" > $OUT/tests_$label.log 2>&1;
   echo "rc $? ($label; 124: time ran out; $SECONDS s)" >> $OUT/tests_$label.log) &
}
# bits TIMEOUT: bitcmp.py's cases under main's wheel and the branch's (one process each), then their comparison
bits() {
  local t=$1
  (PYTHONPATH=/tmp/site_main timeout $t python3 -P $C/bitcmp.py run /tmp/tidy36_bits main &&
   PYTHONPATH=/tmp/site_$NAME timeout $t python3 -P $C/bitcmp.py run /tmp/tidy36_bits branch &&
   python3 -P $C/bitcmp.py compare /tmp/tidy36_bits main branch) > $OUT/bits.log 2>&1 &
}
digest_all() {
  for f in $OUT/tests_*.log; do
    echo "## $(basename $f .log)"
    grep -E "FAILED|ERROR|passed|failed|rror|^rc " $f | tail -8 | cut -c1-300
  done
  echo "## bitcmp"
  grep -vE "^\s*$" $OUT/bits.log | tail -14 | cut -c1-300
}
