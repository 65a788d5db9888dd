# zipfb38's device setup (sourced by runK.sh from the root of main's tree): runlib's common.sh with NAME / BASE
# (carry_setup.sh: main's wheel in /tmp/site_main, the branch's in /tmp/site_zipfb38; `left`: seconds left of BUDGET,
# default 53), `bench` (zipfb38_bench.py with a site's wheel into $OUT/time.log; no label argument), digest_time.
NAME=zipfb38 BASE=main38 LIM=${BUDGET:-53}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
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
