#!/bin/bash
# step38 run 1 (issue 35), main's wheel only (no branch build): where the dedup's number pass spends its ~0.05 ms.
# Sessions 13-23 moved the find (350K table probes) everywhere and it cost ~0.045 ms wherever it ran (inside the
# number pass, as its own kernel over the compacted uniques, inside the insert); prefetching its key and score
# sectors did not move it; its stalls per instruction were never sampled. ncu source counters (SASS, warp-stall
# samples and executed counts per instruction) of one steady SGD step's dedup insert + number kernels (main's
# default, f0), of the same with the number pass's score writes off (d881 = 817 | lab bit 64: timing only, the
# branch's wheel), and of the number-only pass + the find kernel (lab find_later 1, f1). Before them: the rate of random
# 8-byte / 32-byte DRAM accesses at the find's scale (torch gathers / scatters, step38_rand.py).
B=52
. .carry/step38/setup.sh
timeout 10 python3 -P $C/step38_rand.py --reps 15 > $OUT/rand.txt 2>&1
echo "rand rc $? ($(( $(date +%s) - t0 )) s)"; cat $OUT/rand.txt | tail -12
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
PYTHONPATH=$SM timeout $(( $(left) - 12 )) $NCU --clock-control none --profile-from-start off \
  -k "regex:dedup_(number|insert|find)_kernel" -c 7 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum \
  -o $OUT/dd -f python3 -P $C/step38_ncu.py --bench benchmarks --variants f0,d881,f1 > $OUT/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
grep -v "^==PROF==\|^$" $OUT/ncu.log | tail -4 | cut -c1-200
$NCU --import $OUT/dd.ncu-rep --page raw --csv --print-units base > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
timeout $(( $(left) - 2 )) $NCU --import $OUT/dd.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
echo "export rc $? ($(( $(date +%s) - t0 )) s)"
python3 $C/tree/tools/dynamicemb_dev/step_ncu.py --table $OUT/ncu_raw.csv 2>&1 | cut -c1-170
python3 $C/step38_src.py $OUT/src.csv --top 8 2>&1 | cut -c1-130
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
ls -la $OUT | tail -6
echo "total: $(( $(date +%s) - t0 )) s"
