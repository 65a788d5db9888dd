# ctx35 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: carry_setup.sh (carried
# beside it: main35's hstu_attn wheel in /tmp/site_main, the branch's, where carried, in /tmp/site_ctx35, GPU,
# run_tests, digest_tests) with J = ctx35_bench.py (beside fwd17_jag.py), left (seconds left of the run's LIM),
# bench, and a clock log (nvidia-smi every 100 ms into $OUT/smi.csv; smi_stop ends it).
NAME=ctx35 BASE=main35
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/ctx35_bench.py
LIM=${LIM:-50}
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
# smi_digest: the SM clock's and power's range over the run, and the throttle reasons seen
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
