# split39's device setup (sourced by runK.sh from the root of main's tree): carry_setup.sh with NAME / BASE (main's
# wheel in /tmp/site_main, the branch's in /tmp/site_split39), `bench SITE TIMEOUT ARGS` (split39_bench.py into
# $OUT/time.log), `diag SITE TIMEOUT ARGS` (diag_many.py from the carried tree into $OUT/diag.log), `left` (seconds
# left of the 56), digests.
NAME=split39 BASE=main39
source "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh"
left() { echo $(( ${BUDGET:-53} - SECONDS )); }
bench() {
  local site=$1 t=$2
  shift 2
  [ "$t" -gt 3 ] || { echo "bench: no time left"; return; }
  PYTHONPATH=$site timeout $t python3 -P $C/split39_bench.py "$@" >> $OUT/time.log 2>&1
  echo "bench rc $? ($SECONDS s)"
}
diag() {
  local site=$1 t=$2
  shift 2
  [ "$t" -gt 3 ] || { echo "diag: no time left"; return; }
  (cd $C/tree && PYTHONPATH=$site timeout $t python3 -P $C/diag_many.py "$@" >> $OUT/diag.log 2>&1)
  echo "diag rc $? ($SECONDS s)"
}
digest_time() {
  grep -E "^\(|^\| D|^## |rror|Traceback" $OUT/time.log 2>/dev/null | cut -c1-300 | tail -60
}
