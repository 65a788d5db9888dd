#!/bin/bash
# hash26 run 2 (issue 35, load 1.0; no wheel: the branch's wheel was still building): evict_bench built from this
# tree (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 3 reps), the insert variants 0 (main's kernel), 1 (evict_fast at
# 2 blocks/SM) and 2 (evict_fast at 3 blocks/SM) interleaved on the same snapshots and batches (equal checksums = the
# same evictions): uniform at loads 0.5 and 1, Zipf at 1; then ncu source counters of variants 1 and 2's insert
# passes (find_or_insert, insert_or_assign) at 2^24 slots, 256K keys, as run 1's of main's.
C=.carry/hash26
mkdir -p "$OUT"
t0=$(date +%s); B=47
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_h26
timeout 8 $C/eb_h26 26 20 3 - uniform 0.5,1 - 0,1,2 2>&1 | tee $OUT/eb_uniform.txt | grep -v "^keys"
timeout 6 $C/eb_h26 26 20 3 - zipf 1 - 0,1,2 2>&1 | tee $OUT/eb_zipf.txt | grep -v "^keys\|^filled"
timeout 6 $C/eb_h26 26 20 3 - uniform 1 - 2,1,0 2>&1 | tee $OUT/eb_uniform_rev.txt | grep -v "^keys\|^filled"
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout $(( $(left) - 9 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert_kernel" -c 4 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_atom.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed \
  -o $OUT/eb -f $C/eb_h26 24 18 1 ncu uniform 1 - 1,2 > $OUT/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
tail -4 $OUT/ncu.log
$NCU --import $OUT/eb.ncu-rep --page raw --csv --print-metric-instances values > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
timeout $(left) $NCU --import $OUT/eb.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
echo "export rc $? ($(( $(date +%s) - t0 )) s)"
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
rm -f $OUT/eb.ncu-rep
echo "total: $(( $(date +%s) - t0 )) s"
