#!/bin/bash
# hash26 run 3 (issue 35, load 1.0; evict_bench only): run 2 found evict_fast's 18 % fewer insert-pass instructions
# eaten by instruction-fetch stalls (no_instruction 1.6 -> 4.8 cycles per issue) and 3 blocks/SM slower. Variants
# 3 / 4: evict_fast out of line (__noinline__: a compact function of the common path only; 3 spill-free at 2
# blocks/SM, 4 at 3 blocks/SM with 122 / 296 bytes of spills), beside 0 (main's kernel) and 1 (evict_fast inlined),
# interleaved (equal checksums = the same evictions): uniform and Zipf at load 1, uniform again in reverse order;
# then ncu source counters of variants 0 and 3's insert passes (find_or_insert, insert_or_assign), 2^24 slots.
C=.carry/hash26
mkdir -p "$OUT"
t0=$(date +%s); B=47
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
chmod +x $C/eb_v4
timeout 7 $C/eb_v4 26 20 3 - uniform 1 - 0,1,3,4 2>&1 | tee $OUT/eb_uniform.txt | grep -v "^keys"
timeout 7 $C/eb_v4 26 20 3 - zipf 1 - 0,1,3,4 2>&1 | tee $OUT/eb_zipf.txt | grep -v "^keys\|^filled"
timeout 7 $C/eb_v4 26 20 3 - uniform 1 - 4,3,1,0 2>&1 | tee $OUT/eb_uniform_rev.txt | grep -v "^keys\|^filled"
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout $(( $(left) - 10 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert_kernel" -c 4 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,sm__issue_active.avg.pct_of_peak_sustained_elapsed \
  -o $OUT/eb -f $C/eb_v4 24 18 1 ncu uniform 1 - 0,3 > $OUT/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
tail -3 $OUT/ncu.log
$NCU --import $OUT/eb.ncu-rep --page raw --csv --print-metric-instances values > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
timeout $(left) $NCU --import $OUT/eb.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
echo "export rc $? ($(( $(date +%s) - t0 )) s)"
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
rm -f $OUT/eb.ncu-rep
echo "total: $(( $(date +%s) - t0 )) s"
