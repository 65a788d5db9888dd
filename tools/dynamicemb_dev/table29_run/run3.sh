#!/bin/bash
# table29 run 3 (issue 35, load 1.0; prepared, not offered in session 26): 16-entry victim summaries in their steady
# state. evict_bench (uint64 / fp32 /
# LRU, 2^26 slots, 1M keys, 5 reps) from the lab tree, variants interleaved on the same snapshots and batches, on the
# table after 16 warm-up find_or_insert ops on L6's or L7's path (the same evictions as main's path):
#   L0 = the product's insert pass (main's code); L8 = run 2's L6 with 16 entries per summary (32 bytes per bucket),
#   the evictor's requests in a bitmap (a RED), vs16_refresh (a warp per bitmap word, the flagged buckets' lines
#   prefetched before the selection) after the insert pass, in the op's total ("refresh"); L9 = L8 with the refresh
#   of the previous op's requests beside begin_op and the first pass. Equal checksums = the same evictions. Then ncu
#   (2^24 slots, 256K keys): find_or_insert's insert pass L0 / L8 and L8's refresh.
C=.carry/table29
mkdir -p "$OUT"
t0=$(date +%s); B=48
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_lab
echo "## uniform, warmed on L8's path"
timeout 9 $C/eb_lab 26 20 5 - uniform 1 - 8,0 2>&1 | tee $OUT/uniform_l8.txt | grep -v "^keys"
echo "## uniform, warmed on L9's path"
timeout 9 $C/eb_lab 26 20 5 - uniform 1 - 9,0 2>&1 | tee $OUT/uniform_l9.txt | grep -v "^keys"
echo "## zipf, warmed on L8's path"
timeout 10 $C/eb_lab 26 20 5 - zipf 1 - 8,0 2>&1 | tee $OUT/zipf_l8.txt | grep -v "^keys"
echo "## zipf, warmed on L9's path"
timeout 10 $C/eb_lab 26 20 5 - zipf 1 - 9,0 2>&1 | tee $OUT/zipf_l9.txt | grep -v "^keys"
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
l=$(left)
if [ $l -ge 8 ]; then
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert_kernel|vs16_refresh" -c 3 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
    --csv --page raw $C/eb_lab 24 18 1 ncu uniform 1 - 0,8 > $OUT/ncu.csv 2> $OUT/ncu.err
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
fi
gzip -f $OUT/ncu.csv 2>/dev/null
echo "## digest"
grep -h "^find_or_insert\|^insert_or_assign\|^insert_and_evict\|^assign\|^vsum\|^summaries\|^16-entry\|^filled" $OUT/uniform_l8.txt $OUT/uniform_l9.txt $OUT/zipf_l8.txt $OUT/zipf_l9.txt \
  | awk '/^(vsum|summaries|16-entry|filled)/ {print; next} {o = $1 " " $2 " total " $4 " " $6 ")"; for (i = 7; i < NF; ++i) if ($i ~ /^(first|insert|refresh|pending|evi|table|evicted)$/) o = o " " $i " " $(i + 1); print o}'
echo "total: $(( $(date +%s) - t0 )) s"
