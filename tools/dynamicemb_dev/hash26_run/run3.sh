#!/bin/bash
# hash26 run 3 (issue 35, load 1.0; the wheel): the insert pass's evict_fast (private _upsert_lab bits 2 / 4: flagged
# full-bucket keys under LRU through a short inlined eviction path at 2 / 3 blocks per SM). 1) evict_bench built
# from this tree (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 3 reps; insert variants 0 / 1 / 2 interleaved on the same
# snapshots and batches, checksums = same evictions): uniform at loads 0.5 and 1, Zipf at 1; 2) table_ab in one
# process (pdl = the default, pdl+fast, pdl+fast3) at loads 1.0 / 0.5, uniform and Zipf; 3) GPU tests with the
# variants forced on (--upsert-lab 3 / 5; the branch's test_table_gpu.py with the new variants test), in parallel.
B=47
. .carry/hash26/setup.sh
chmod +x $C/eb_h26
timeout 6 $C/eb_h26 26 20 3 - uniform 0.5,1 - 0,1,2 2>&1 | tee $OUT/eb_uniform.txt | grep -v "^keys"
timeout 5 $C/eb_h26 26 20 3 - zipf 1 - 0,1,2 2>&1 | tee $OUT/eb_zipf.txt | grep -v "^keys\|^filled"
echo "evict_bench: $(( $(date +%s) - t0 )) s"
PYTHONPATH=$S:$C:benchmarks timeout 16 python3 $C/table_ab.py --variants pdl pdl+fast pdl+fast3 --lambdas 1.0 0.5 \
  --dists uniform zipf --reps 3 2>&1 | tee $OUT/table_ab.txt
echo "table_ab: $(( $(date +%s) - t0 )) s"
T=$(( $(left) - 2 ))
timeout $T $PT $TG -k "insert_variants and uniform" > $OUT/t_variants.txt 2>&1 & p1=$!
timeout $T $PT $TG -k "insert_variants and zipf" > $OUT/t_variants_z.txt 2>&1 & p9=$!
timeout $T $PT --upsert-lab 5 $TG -k "full_table or duplicates or contention" > $OUT/t_lab5.txt 2>&1 & p2=$!
timeout $T $PT --upsert-lab 3 $TG -k "full_table or duplicates or contention" > $OUT/t_lab3.txt 2>&1 & p3=$!
timeout $T $PT --upsert-lab 5 $E > $OUT/e_lab5.txt 2>&1 & p4=$!
timeout $T $PT --upsert-lab 3 $E > $OUT/e_lab3.txt 2>&1 & p5=$!
timeout $T $PT --upsert-lab 5 $H > $OUT/h_lab5.txt 2>&1 & p6=$!
timeout $T $PT --upsert-lab 3 $H > $OUT/h_lab3.txt 2>&1 & p7=$!
timeout $T $PT --upsert-lab 5 $TG -k "test_gpu_matches_cpu_twin" > $OUT/t_twin5.txt 2>&1 & p8=$!
for p in $p1 $p9 $p2 $p3 $p4 $p5 $p6 $p7 $p8; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_variants t_variants_z t_lab5 t_lab3 e_lab5 e_lab3 h_lab5 h_lab3 t_twin5; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A25 "^____\|Error\|assert" $OUT/t_*.txt $OUT/e_*.txt $OUT/h_*.txt | head -60
echo "total: $(( $(date +%s) - t0 )) s"
