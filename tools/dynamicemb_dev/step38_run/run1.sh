#!/bin/bash
# step38 run 1 (issue 35): the dedup's number pass (~0.062 ms of the SGD step's 0.126 ms dedup chain; ~0.045 of it
# the find of 350K uniques, which cost about that wherever earlier sessions put it and was never stall-sampled).
# Branch wheel (main 6ca06103 + lab bits of the dedup flags; "-" = main's code path, 817):
#   825 = 817 | 8: the find by the count pass's claimers (2 waves) instead of the number pass (2.6 waves);
#   821 = 817 | 4: the find on a side stream forked after the insert (beside count + number), joined before resolve;
#   823 = 821 | 2: the side find on 2 blocks per SM (leaves the count and number passes their slots);
#   881 = 817 | 64: timing only, the number pass's find without its score writes (not a product path).
# (1) GPU tests (beside (2)): the bitwise dedup-variant test with 9 / 825 / 5 / 821 / 823, them against 817 under
# LFU / epoch evictions, CUDA-graph steps and bad inputs under them; (2) ncu source counters (SASS, stall samples per
# instruction) of one SGD step's count + number kernels under - (f0) and 821 (+ its side find kernel);
# (3) then alone: steady_ab.py SGD -,825,821,823,881 with the timeline.
B=53
. .carry/step38/setup.sh
T=/tmp/t38/tests/dynamicemb
(cd /tmp/t38 && PYTHONPATH=$SM timeout 20 $PT $T/test_embedding_gpu.py $T/test_checks_gpu.py -k \
  "dedup_insert_variants_agree or count_find_agrees or under_dedup_variants" > $OUT/t_dedup.txt 2>&1) &
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
PYTHONPATH=$SM timeout -s INT 22 $NCU --clock-control none --profile-from-start off \
  -k "regex:dedup_(number|count|side_find)_kernel" -c 5 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --section SpeedOfLight \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,gpu__time_duration.sum \
  -o $OUT/dd -f python3 -P $C/step38_ncu.py --bench benchmarks --variants f0,d821 > $OUT/ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
wait
echo "tests ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed|error)' $OUT/t_dedup.txt | tail -1)"
grep -h -A4 "^E  \|^FAILED" $OUT/t_dedup.txt | head -8 | cut -c1-200
PYTHONPATH=$SM timeout $(( $(left) - 4 )) python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline --opt sgd \
  --variants=-,825,821,823,881 --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "steady rc $? ($(( $(date +%s) - t0 )) s)"
grep -A8 "steady step" $OUT/steady.txt | grep "^| [-0-9]" | cut -c1-100
grep -A30 "kernels with the host ahead" $OUT/steady.txt | grep "dedup_\|kernels with" | cut -c1-120
grep -v "^==PROF==\|^$" $OUT/ncu.log | tail -2 | cut -c1-160
$NCU --import $OUT/dd.ncu-rep --page raw --csv --print-units base > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
timeout 3 $NCU --import $OUT/dd.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
python3 $C/tree/tools/dynamicemb_dev/step_ncu.py --table $OUT/ncu_raw.csv 2>&1 | grep "^| [0-9]" | cut -c1-150
python3 $C/step38_src.py $OUT/src.csv --top 4 --k number 2>&1 | head -7 | cut -c1-110
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
echo "total: $(( $(date +%s) - t0 )) s"
