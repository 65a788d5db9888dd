# fp8b17's run scripts' common setup (sourced by run.sh / run2.sh / run3.sh from the root of main's tree on the
# device): strict mode, OUT, R (the tree), C (.carry/fp8b17), left() (seconds to $LIM, default 57), the branch's
# wheel in /tmp/site_fp8b17 and (WITH_MAIN=1) main16's in /tmp/site_fp8b17_main, GPU (name and clocks), NCU.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_fp8b17}
mkdir -p "$OUT"
R=$PWD
C=$R/.carry/fp8b17
left() { echo $((${LIM:-57} - SECONDS)); }
rm -rf /tmp/site_fp8b17 /tmp/site_fp8b17_main
for w in "fp8b17 $C/whl" "fp8b17_main $R/.carry/main16/whl"; do
  set -- $w
  [ "$1" = fp8b17_main ] && [ "${WITH_MAIN:-0}" = 0 ] && continue
  python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$1 $2/hstu_attn-*.whl 2>&1 \
      | grep -v WARN | tail -2
done
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
# digest_tests LOG: the pytest log's PASSED / FAILED counts and its last summary lines
digest_tests() {
  echo "#### tests ($1): $(grep -c PASSED $1) PASSED, $(grep -c -E 'FAILED|ERROR' $1) FAILED/ERROR lines"
  grep -E "FAILED|ERROR|passed|failed|Error" $1 | tail -8 | cut -c1-300
}
# digest_tables TITLE FILE: the markdown rows (and errors) of a script's output
digest_tables() {
  echo "#### $1"
  grep -E "^\| |rror|Traceback|^- device" $2 2>/dev/null | cut -c1-330
}
