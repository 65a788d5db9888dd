# The shared device side of the tools/hstu_dev/*_run folders (runlib/pack.sh carries it, with carry_setup.sh,
# labtime.py and ncu_csv.py, into .carry/NAME/). A folder's setup.sh sets NAME, BASE (the lead's folder of main's
# wheels) and LIM (the script's budget in seconds, default 50), then sources this file; runK.sh runs from the root
# of main's tree on the device and sources setup.sh. This file sources carry_setup.sh (strict mode, OUT, R, C, main's
# wheel in /tmp/site_main, the branch's in /tmp/site_$NAME, GPU, PT, run_tests, digest_tests, jag) and adds
#   RL                          this folder (the carry folder on the device)
#   NCU, CUOBJ                  ncu's and cuobjdump's paths (empty where absent)
#   left                        seconds left of LIM
#   bench SITE LABEL TIMEOUT ARGS...   $J LABEL $BENCH_OPTS ARGS with SITE's wheel, appended to $OUT/time.log
#                               (no run when TIMEOUT <= 2 s)
#   ncu_bench SITE MIN REGEX METRICS ARGS...   ncu (--clock-control none, the kernels matching REGEX, --metrics
#                               METRICS, --csv) of `$J ARGS` with SITE's wheel into $OUT/ncu.csv (stderr ncu.err) when
#                               ncu is there and more than MIN s are left; its timeout: the seconds left less
#                               NCU_SPARE (default 1)
#   gpu_tests SECS ARGS...      pytest -v over the carry's tree/ with the branch's wheel, into $OUT/tests.log
#   digest_gpu_tests [WIDTH]    gpu_tests' log: its PASSED lines counted, the summary and failure lines
#   digest_progress             pytest's last progress lines (where time ran out before its summary)
#   gpu_power                   the GPU line with its temperature and power draw
#   ncu_times CSV / ncu_metrics CSV / ncu_raw CSV...   ncu_csv.py's digests (see there)
# (carry_setup.sh beside this file in a carry folder; in the tree, from tools/hstu_dev/runlib, in its parent)
# a carry's xz wheels (bwd41_run/xzwheel.py pack, carried beside this file) unpacked first, for carry_setup.sh
for _x in "$(dirname "${BASH_SOURCE[0]}")"/whl/*.whl.xz; do
  [ -f "$_x" ] || continue
  python3 "$(dirname "${BASH_SOURCE[0]}")/xzwheel.py" unpack "$_x" "${_x%.xz}" && rm -f "$_x"
done
if [ -f "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh" ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/carry_setup.sh"
else
  source "$(dirname "${BASH_SOURCE[0]}")/../carry_setup.sh"
fi
RL=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIM=${LIM:-50}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
left() { echo $(( LIM - SECONDS )); }
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 2 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $J $label ${BENCH_OPTS:-} "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
ncu_bench() {
  local site=$1 min=$2 re=$3 m=$4
  shift 4
  [ -n "$NCU" ] && [ $(left) -gt $min ] || return 0
  PYTHONPATH=$site timeout $(( $(left) - ${NCU_SPARE:-1} )) $NCU --clock-control none -k "regex:$re" --metrics $m \
      --csv python3 -P $J "$@" > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "rc $? (ncu, $SECONDS s)"
}
gpu_tests() {
  local secs=$1
  shift
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
      --import-mode=importlib --tb=short --maxfail=3 -rfE "$@" > $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
}
digest_gpu_tests() {
  echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-${1:-200} | tail -6
}
digest_progress() {
  grep -E "^[.FEsx]+ *(\[ *[0-9]+%\])?$" $OUT/tests.log | tail -2
}
gpu_power() {
  echo "GPU: $GPU, $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
}
ncu_times() { python3 $RL/ncu_csv.py times "$1" 2>&1; }
ncu_metrics() { python3 $RL/ncu_csv.py metrics "$1" 2>&1; }
ncu_raw() { python3 $RL/ncu_csv.py raw "$@" 2>&1; }
