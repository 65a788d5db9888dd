# ctx36 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: carry_setup.sh (carried
# beside it: main36's hstu_attn wheel in /tmp/site_main, the branch's in /tmp/site_ctx36, GPU, run_tests) with
# J = ctx35_bench.py (tools/hstu_dev/ctx35_run, carried beside fwd17_jag.py), left (seconds left of the run's LIM),
# bench, and a clock log (nvidia-smi every 100 ms into $OUT/smi.csv; smi_stop ends it, smi_digest sums it up).
NAME=ctx36 BASE=main36
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/ctx35_bench.py
LIM=${LIM:-52}
left() { echo $(( LIM - SECONDS )); }
# bench SITE LABEL TIMEOUT ARGS...: ctx35_bench.py LABEL ARGS with SITE's wheel, appended to $OUT/time.log
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 2 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
smi_stop() { kill $SMI 2>/dev/null; }
smi_digest() {
  python3 - $OUT/smi.csv <<'PY'
import sys
clk, pw, thr = [], [], set()
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    if len(f) < 6 or not f[1].split()[0].isdigit():
        continue
    clk.append(int(f[1].split()[0])); pw.append(float(f[3].split()[0])); thr.add(f[5])
if clk:
    print(f"smi: {len(clk)} samples, SM clock {min(clk)}-{max(clk)} MHz (median {sorted(clk)[len(clk)//2]}), "
          f"power {min(pw):.0f}-{max(pw):.0f} W, throttle reasons {sorted(thr)}")
PY
}
# digest of the tests: per test function PASSED / FAILED counts, then pytest's summary lines
test_digest() {
  grep -E "PASSED|FAILED|ERROR" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.* (PASSED|FAILED|ERROR).*/\1 \2/' |
    sort | uniq -c
  grep -E "^FAILED|^ERROR|[0-9]+ (passed|failed)|rror" $OUT/tests.log | tail -8 | cut -c1-300
}
