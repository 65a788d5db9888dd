# fwd31 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd30_run's setup (carried
# here as setup30.sh beside carry_setup.sh, ncu_digest.py and jag/: the branch's wheel in /tmp/site_fwd31, GPU,
# run_tests, digest_tests, left, ncu_case) with B = fwd31_bench.py.
NAME=fwd31 BASE=${BASE:-main31}
source "$(dirname "${BASH_SOURCE[0]}")"/setup30.sh
B=$C/jag/fwd31_bench.py
# bench SITE LABEL TIMEOUT ARGS...: fwd31_bench.py with SITE's wheel, appended to $OUT/time.log
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $B $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
