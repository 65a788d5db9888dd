#!/bin/bash
# hash24 run 3 (short): insert_and_evict's victim row prefetched into L2 before the victim's exchange (private
# option _upsert_lab bit 2, "pv"). GPU tests with pdl + pv forced on (--upsert-lab 3), in parallel; then table_ab at
# load 1.0 (pdl = the default, pdl+pv, plain launches) in one process. (pv measured no gain and was removed after
# this run: table_ab.py no longer knows it.)
B=29
. .carry/hash24/setup.sh
timeout 18 $PT --upsert-lab 3 $T -k "test_gpu_matches_cpu_twin or contention" > $OUT/t_twin.txt 2>&1 & p1=$!
timeout 18 $PT --upsert-lab 3 tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py > $OUT/e_ties.txt 2>&1 & p2=$!
timeout 18 $PT --upsert-lab 3 tests/dynamicemb/test_storage_gpu.py > $OUT/storage.txt 2>&1 & p3=$!
timeout 18 $PT --upsert-lab 3 $H > $OUT/hybrid.txt 2>&1 & p4=$!
for p in $p1 $p2 $p3 $p4; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_twin e_ties storage hybrid; do echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A30 "^____\|Error\|assert" $OUT/*.txt | head -60
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants pdl pdl+pv main --lambdas 1.0 \
  --dists uniform --reps 3 2>&1 | tee $OUT/table_ab.txt
echo "total: $(( $(date +%s) - t0 )) s"
