#!/bin/bash
# hash27 run 1 (issue 35, load 1.0; evict_bench only, uint64 / fp32 / LRU, 2^26 slots, 1M keys, 3 reps, variants
# interleaved on the same snapshots and batches, equal checksums = the same evictions):
#   eb_h27: 4 lanes per key (the product), insert-pass group schedules 0 (main's), 1 (static ~3/4, counter for the
#           tail), 2 (1 + the next group's pending entries by cp.async);
#   eb_t2:  the lab copy with 2 lanes per key (16 keys per warp: twice the evicting keys in flight per SM at the
#           same registers), the same three schedules.
# Uniform at loads 0.5 and 1, Zipf at 1, uniform again in reverse order; then ncu (no source counters) of the
# insert pass of find_or_insert / insert_or_assign at 2^24 slots for both binaries, schedule 0.
C=.carry/hash27
mkdir -p "$OUT"
t0=$(date +%s); B=48
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_h27 $C/eb_t2
for b in h27 t2; do
  echo "## $b uniform"
  timeout 9 $C/eb_$b 26 20 3 - uniform 0.5,1 - 0,1,2 2>&1 | tee $OUT/${b}_uniform.txt | grep -v "^keys"
done
for b in h27 t2; do
  echo "## $b zipf"
  timeout 7 $C/eb_$b 26 20 3 - zipf 1 - 0,1,2 2>&1 | tee $OUT/${b}_zipf.txt | grep -v "^keys\|^filled"
done
echo "## h27 uniform, reverse order"
timeout 7 $C/eb_h27 26 20 3 - uniform 1 - 2,1,0 2>&1 | tee $OUT/h27_uniform_rev.txt | grep -v "^keys\|^filled"
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for b in h27 t2; do
  l=$(left); [ $l -lt 6 ] && break
  timeout $(( l / 2 > 5 ? l / 2 : 5 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_(main|insert)_kernel" -c 4 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \
    --csv --page raw $C/eb_$b 24 18 1 ncu uniform 1 - 0 > $OUT/ncu_$b.csv 2> $OUT/ncu_$b.err
  echo "ncu $b rc $? ($(( $(date +%s) - t0 )) s)"
done
gzip -f $OUT/ncu_*.csv 2>/dev/null
echo "total: $(( $(date +%s) - t0 )) s"
