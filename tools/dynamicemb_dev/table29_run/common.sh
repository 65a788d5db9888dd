# Sourced by table29's runK.sh (copied with them into .carry/table29/; run from main's tree root on the device):
# the run's clock against its budget B, the GPU line, and the helpers
#   eb NAME TIMEOUT ARGS...       one evict_bench process (eb_lab ARGS), its output in $OUT/NAME.txt
#   ncu_pass KERNELS COUNT LABS   ncu of the first COUNT kernels matching KERNELS (one rep per op at 2^24 slots, 256K
#                                 keys, lab values LABS), the left budget as its limit, then a table of its counters
#   digest NAME...                the op lines of $OUT/NAME.txt, shortened, and the run's total time
C=.carry/table29
mkdir -p "$OUT"
t0=$(date +%s); B=48
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_lab
eb() {
  local name=$1 to=$2
  shift 2
  echo "## $name"
  timeout $to $C/eb_lab "$@" 2>&1 | tee $OUT/$name.txt | grep -v "^keys"
}
ncu_pass() {
  echo "timing: $(( $(date +%s) - t0 )) s"
  local l=$(left)
  [ $l -ge 8 ] || return 0
  local NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:$1" -c $2 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
    --csv --page raw $C/eb_lab 24 18 1 ncu uniform 1 - $3 > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
  python3 - "$OUT/ncu.csv" <<'PY' || true
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
rows = list(csv.reader(lines[start[0]:])) if start else []
if len(rows) > 2:
    h = rows[0]
    want = ["Kernel Name", "gpu__time_duration.sum", "smsp__inst_executed.sum", "smsp__thread_inst_executed.sum",
            "sm__issue_active.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum", "dram__bytes_write.sum",
            "lts__t_bytes.sum", "smsp__average_warp_latency_per_inst_issued.ratio",
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
            "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio"]
    idx = [h.index(w) for w in want if w in h]
    for i in idx:
        print("| " + h[i][:60] + " | " + " | ".join(r[i][:36] for r in rows[2:]) + " |")
PY
  gzip -f $OUT/ncu.csv 2>/dev/null
}
digest() {
  echo "## digest"
  local f files=()
  for f in "$@"; do files+=("$OUT/$f.txt"); done
  grep -h "^find_or_insert\|^insert_or_assign\|^insert_and_evict\|^assign\|^vsum\|^summaries\|^16-entry\|^filled" \
    "${files[@]}" | awk '/^(vsum|summaries|16-entry|filled)/ {print; next}
      {o = $1 " " $2 " total " $4 " " $6 ")"
       for (i = 7; i < NF; ++i) if ($i ~ /^(first|insert|refresh|pending|evi|table|evicted)$/) o = o " " $i " " $(i + 1)
       print o}'
  echo "total: $(( $(date +%s) - t0 )) s"
}
