# Sourced by assign37's runK.sh (copied with them into .carry/assign37/; run from main's tree root on the device):
# the run's clock against its budget B, the GPU line, and
#   ab NAME TIMEOUT ARGS...   one assign_bench process (ARGS as assign_bench's), output in $OUT/NAME.txt, echoed
#   ncu_ab TAG VARIANTS       ncu of the assign kernels (main's first pass and/or assign_lru_kernel) at load 1.0,
#                             2^24 slots: time, DRAM bytes, occupancy, issue, L2 atomics, and the warp stall reasons
C=.carry/assign37
mkdir -p "$OUT"
t0=$(date +%s); B=${B:-50}
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
chmod +x $C/ab_lab 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ab() {
  local name=$1 to=$2
  shift 2
  echo "## $name ($(( $(date +%s) - t0 )) s)"
  timeout $to $C/ab_lab "$@" > $OUT/$name.txt 2>&1
  echo "rc $?"
  cat $OUT/$name.txt | cut -c1-170
}
ncu_ab() {
  local l=$(left)
  [ -n "$NCU" ] && [ $l -ge 8 ] || { echo "ncu_ab $1 skipped ($l s left, ncu '$NCU')"; return 0; }
  local M=gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum
  M=$M,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main|assign_lru" -c 4 \
    --section WarpStateStats --metrics $M --csv --page raw $C/ab_lab 24 1 ncu ${3:-uniform} 1 32 $2 \
    > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
  echo "## ncu_ab $1 rc $? ($(( $(date +%s) - t0 )) s)"
  python3 - $OUT/ncu_$1.csv <<'PY' || true
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
rows = list(csv.reader(lines[start[0]:])) if start else []
if len(rows) < 3:
    print("no ncu rows"); sys.exit(0)
h = rows[0]
ki = h.index("Kernel Name")
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return None
short = {"gpu__time_duration.sum": "us", "smsp__inst_executed.sum": "winst", "dram__bytes_read.sum": "dram_rd",
         "dram__bytes_write.sum": "dram_wr", "lts__t_sectors_op_atom.sum": "atom_sec", "lts__t_sectors_op_red.sum": "red_sec",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%", "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
         "launch__registers_per_thread": "regs", "launch__occupancy_limit_registers": "blk/SM(regs)"}
for r in rows[2:]:
    n = r[ki]
    print("# " + n[:n.find("(")][-60:] + ": " + ", ".join("%s %s" % (v, r[h.index(k)][:10]) for k, v in short.items() if k in h))
    st = [(num(r[i]), h[i]) for i in range(len(h)) if "issue_stalled" in h[i] and h[i].endswith(".ratio") and num(r[i]) is not None]
    st.sort(reverse=True)
    print("  stalls: " + ", ".join("%s %.2f" % (n.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""), v) for v, n in st[:9]))
PY
  gzip -f $OUT/ncu_$1.csv
}
