# zipfb38's device setup (sourced by runK.sh from the root of main's tree): carry_setup.sh with NAME / BASE (main's
# wheel in /tmp/site_main, the branch's in /tmp/site_zipfb38), `bench` (zipfb38_bench.py with a site's wheel into
# $OUT/time.log), `left` (seconds left of the 56), digests.
NAME=zipfb38 BASE=main38
source "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh"
left() { echo $(( ${BUDGET:-53} - SECONDS )); }
# bench SITE TIMEOUT ARGS...
bench() {
  local site=$1 t=$2
  shift 2
  [ "$t" -gt 3 ] || { echo "bench: no time left"; return; }
  PYTHONPATH=$site timeout $t python3 -P $C/zipfb38_bench.py "$@" >> $OUT/time.log 2>&1
  echo "bench rc $? ($SECONDS s)"
}
digest_time() {
  grep -E "^\(|^\| D|^## |rror|Traceback" $OUT/time.log 2>/dev/null | cut -c1-260 | tail -60
}
