# bwd16 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree: strict mode, OUT, the
# carry folder C, left() (seconds to the script's LIM, default 57), the branch's wheel in /tmp/site_bwd16 and
# main15's in /tmp/site_bwd16_main, GPU (name and clocks), T80 (main's time80.py; the cfgs are passed through).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_bwd16}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/bwd16
left() { echo $((${LIM:-57} - SECONDS)); }
rm -rf /tmp/site_bwd16 /tmp/site_bwd16_main
for w in "bwd16 $C/whl" "bwd16_main $R/.carry/main15/whl"; do
  set -- $w
  python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$1 $2/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
done
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
T80=$R/tools/hstu_dev/bwd80_run/time80.py
# The digest's test and timing parts (the end of stdout); $1: what the time columns mean.
digest_tests_time() {
  echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8
  grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
  echo "#### time80 (ms (TFLOP/s); main15 = main 794b180's wheel; $1)"
  grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-200
}
