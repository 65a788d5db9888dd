# rabf38's run scripts' common part (issue 39, session 35), sourced by runK.sh from the root of main's tree on the
# device: carry_setup.sh (carried beside it: main38's hstu_attn wheel in /tmp/site_main, the branch's in
# /tmp/site_rabf38; GPU, PT, run_tests, digest_tests), J (sm80_case_bench.py beside fwd17_jag.py), left (seconds left of
# LIM), bench, NCU, ncu_digest.
NAME=rabf38 BASE=main38
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/sm80_case_bench.py
LIM=${LIM:-50}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
left() { echo $(( LIM - SECONDS )); }
# bench SITE LABEL TIMEOUT ARGS...: sm80_case_bench.py LABEL ARGS with SITE's wheel, appended to $OUT/time.log
bench() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 2 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site timeout $t python3 -P $J $label --tag rabf38 "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($label, $SECONDS s)"
}
# ncu_digest CSV: one line per kernel launch, its metrics (names shortened)
ncu_digest() {
  python3 - "$1" <<'PY' 2>&1 | head -12
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, mi, vi, ii = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value"), head.index("ID")
out = {}
for r in rows[1:]:
    m = r[mi].replace("smsp__average_warps_issue_stalled_", "st_").replace("_per_issue_active.ratio", "")
    m = m.replace("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor%")
    m = m.replace("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram%").replace("gpu__time_duration.sum", "ns")
    out.setdefault((r[ii], r[ki][:26]), {})[m] = r[vi]
for (i, k), m in out.items():
    print(i, k, " ".join(f"{a}={b}" for a, b in sorted(m.items())))
PY
}
