#!/bin/bash
# hash26 run 1 (issue 35, load 1.0): evict_bench (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 3 reps) of main's kernels
# and of v1 (the insert pass's eviction path inlined for keys the first pass flagged full-bucket), same process
# layout, uniform then Zipf; then ncu source counters (SASS) of main's first and insert passes of find_or_insert /
# insert_or_assign at 2^24 slots, 256K keys (session 14's setting). Binaries built here with
# -lineinfo from main df4a8c3 (eb_main) and the v1 tree (eb_v1); no wheel is installed.
C=.carry/hash26
mkdir -p "$OUT"
t0=$(date +%s); B=47
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_main $C/eb_v1
for d in uniform zipf; do
  for v in main v1; do
    echo "## $v $d"
    timeout 8 $C/eb_$v 26 20 3 - $d 1 2>&1 | tee $OUT/eb_${v}_$d.txt | grep -v "^filled\|^keys"
  done
done
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout $(( $(left) - 9 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_(main|insert)_kernel" -c 4 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum \
  -o $OUT/eb -f $C/eb_main 24 18 1 ncu uniform 1 > $OUT/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
tail -5 $OUT/ncu.log
$NCU --import $OUT/eb.ncu-rep --page raw --csv --print-metric-instances values > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
timeout $(left) $NCU --import $OUT/eb.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
echo "export rc $? ($(( $(date +%s) - t0 )) s)"
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
rm -f $OUT/eb.ncu-rep  # (read here: no ncu on the build machine)
ls -la $OUT
echo "total: $(( $(date +%s) - t0 )) s"
