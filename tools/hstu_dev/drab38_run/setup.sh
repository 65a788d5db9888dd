# drab38's run scripts' common part (issue 39, session 35: drab's zeros by bulk copies), sourced by runK.sh from the
# root of main's tree on the device: carry_setup.sh (carried beside it: main38's hstu_attn wheel in /tmp/site_main,
# the branch's in /tmp/site_drab38; GPU, PT, run_tests, digest_tests), J (drab38_bench.py beside fwd17_jag.py), left
# (seconds left of LIM), bench.
NAME=drab38 BASE=main38
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/drab38_bench.py
LIM=${LIM:-53}
left() { echo $(( LIM - SECONDS )); }
# bench SITE LABEL TIMEOUT ARGS...: drab38_bench.py LABEL ARGS with SITE's wheel, appended to $OUT/time.log
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 2 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
