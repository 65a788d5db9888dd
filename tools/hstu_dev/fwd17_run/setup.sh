# fwd17 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: strict mode,
# OUT, R (the tree), C (the carry folder), main16's wheel in /tmp/site_fwd17_main and (if carried) the branch's in
# /tmp/site_fwd17, GPU (name and clocks), J (fwd17_jag.py), PT (pytest's command line), NCU.
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fwd17}
mkdir -p "$OUT"
C=$R/.carry/fwd17
# install_wheel SITE WHEEL_DIR: the hstu_attn wheel of WHEEL_DIR (if there) into a fresh SITE
install_wheel() {
  rm -rf "$1"
  if ls $2/hstu_attn-*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
  fi
}
install_wheel /tmp/site_fwd17_main $R/.carry/main16/whl
install_wheel /tmp/site_fwd17 $C/whl
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
J=$C/fwd17_jag.py
PT="python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=4 -rfE"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
digest_tests() {
  echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | tail -10 | cut -c1-300
}
# run_tests TIMEOUT EXPR FILE...: the branch's test files (the carry's tree) under pytest -k EXPR, into tests.log
run_tests() {
  local t=$1 k=$2
  shift 2
  (cd $C/tree && PYTHONPATH=/tmp/site_fwd17 timeout $t $PT "$@" -k "$k" >> $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s)"
}
# ncu_digest REP: per kernel, the launch and balance metrics of an ncu report (raw page, csv)
ncu_digest() {
  $NCU --import "$1" --page raw --csv > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 - "$OUT/ncu_raw.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    sys.exit(print("no ncu rows"))
hdr, data = rows[0], rows[2:]
want = ["Kernel Name", "gpu__time_duration.sum", "launch__grid_size", "launch__registers_per_thread",
        "launch__occupancy_limit_shared_mem", "sm__cycles_active.avg", "sm__cycles_active.max", "sm__cycles_active.min",
        "sm__cycles_elapsed.max", "smsp__inst_executed.sum", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed"]
idx = [hdr.index(w) if w in hdr else None for w in want]
short = ["kernel", "ns", "grid", "regs", "occ smem", "cyc act avg", "max", "min", "elapsed max", "inst",
         "warps act %", "hmma %", "SOL %"]
print("| " + " | ".join(short) + " | act avg / elapsed |")
print("|" + "---|" * (len(short) + 1))
for r in data:
    vals = [(r[i] if i is not None else "-") for i in idx]
    vals[0] = vals[0][:40]
    try:
        bal = f"{float(vals[5].replace(',', '')) / float(vals[8].replace(',', '')):.2f}"
    except ValueError:
        bal = "-"
    print("| " + " | ".join(vals) + f" | {bal} |")
PY
}
# ncu_run SITE REPORT ARGS...: one launch each of prof17.py's cases under ncu (kernels matching $NCU_K, at most
# $NCU_C of them), with the launch and balance metrics; its digest into $OUT/ncu_digest.md. Skipped under 10 s left
# of the 57 s budget.
ncu_run() {
  local site=$1 rep=$2 left=$((57 - SECONDS))
  shift 2
  [ "$left" -gt 10 ] || { echo "(ncu skipped: $left s left)"; return; }
  PYTHONPATH=$site timeout $((left - 2)) $NCU --clock-control none -k "regex:${NCU_K:-hstu_fwd_kernel|flash_fwd}" \
      -c ${NCU_C:-16} --section SpeedOfLight --section LaunchStats \
      --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
      -o $OUT/$rep -f python3 -P $C/prof17.py "$@" > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  ncu_digest $OUT/$rep.ncu-rep > $OUT/ncu_digest.md 2>&1
}
# jag SITE LABEL TIMEOUT ARGS...: fwd17_jag.py LABEL ARGS with SITE's wheel, appended to $OUT/time.log
jag() {
  local site=$1 label=$2 t=$3
  shift 3
  PYTHONPATH=$site timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
