#!/bin/bash
# table29 run 1 (issue 35, load 1.0): the upper bound of a per-bucket victim summary. evict_bench (uint64 / fp32 /
# LRU, 2^26 slots, 1M keys, 5 reps) from the lab tree, variants interleaved on the same snapshots and batches:
#   L0 = the product's insert pass (main's code), L4 = its eviction scan from a summary of the bucket's 8 least ranks
#   (built for every bucket before each op, untimed; its build time printed once) with main's prefetch of the whole
#   bucket, L5 = the same with the digest line and the 8 entries' score sectors prefetched only. Equal checksums =
#   the same evictions. Uniform, Zipf, uniform in reverse order; then ncu of find_or_insert's insert pass (2^24
#   slots, 256K keys; L0 / L4 / L5).
C=.carry/table29
mkdir -p "$OUT"
t0=$(date +%s); B=48
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_lab
echo "## uniform"
timeout 10 $C/eb_lab 26 20 5 - uniform 1 - 0,4,5 2>&1 | tee $OUT/uniform.txt
echo "## zipf"
timeout 10 $C/eb_lab 26 20 5 - zipf 1 - 0,4,5 2>&1 | tee $OUT/zipf.txt | grep -v "^keys"
echo "## uniform, reverse order"
timeout 9 $C/eb_lab 26 20 5 - uniform 1 - 5,4,0 2>&1 | tee $OUT/uniform_rev.txt | grep -v "^keys\|^filled"
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
l=$(left)
if [ $l -ge 8 ]; then
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert_kernel" -c 3 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
    --csv --page raw $C/eb_lab 24 18 1 ncu uniform 1 - 0,4,5 > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
  python3 - "$OUT/ncu.csv" <<'PY' || true
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) > 2:
    h = rows[0]
    want = ["Kernel Name", "gpu__time_duration.sum", "smsp__inst_executed.sum", "smsp__thread_inst_executed.sum",
            "sm__issue_active.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum", "dram__bytes_write.sum",
            "lts__t_bytes.sum"]
    idx = [h.index(w) for w in want if w in h]
    print("| " + " | ".join(h[i] for i in idx) + " |")
    for r in rows[2:]:
        print("| " + " | ".join(r[i][:40] for i in idx) + " |")
PY
fi
gzip -f $OUT/ncu.csv 2>/dev/null
echo "## digest"
grep -h "^find_or_insert\|^insert_or_assign\|^insert_and_evict\|^assign\|^vsum" $OUT/uniform.txt $OUT/zipf.txt $OUT/uniform_rev.txt \
  | awk '/^vsum/ {print; next} {print $1, $2, "total", $4, $6 ")", "first", $11, "insert", $13, "pending", $15, "evi", $21, $25, $27}'
echo "total: $(( $(date +%s) - t0 )) s"
