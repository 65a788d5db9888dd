#!/bin/bash
# hash27 run 2 (issue 35): the branch's dynamicemb wheel. GPU tests with the insert pass's schedule forced to
# kInsertLabPrefetch (_upsert_lab 5 = pdl + prefetch) and kInsertLabStatic (3), in parallel processes: the table
# tests (this branch's test_table_gpu.py, with the new test_gpu_full_table_insert_schedules_agree at the scale where
# the schedules differ), the hybrid split, eviction ties and the full table; then table_ab.py in one process: main's
# default (pdl) against pdl + static and pdl + prefetch at loads 1.0 and 0.5, uniform and Zipf.
C=.carry/hash27
S=/tmp/site_hash27
B=47
t0=$(date +%s)
left() { local l=$(( B - $(date +%s) + t0 )); echo $(( l > 1 ? l : 1 )); }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
rm -rf $S; python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl
export PYTHONPATH=$S:$C
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -p upsert_lab_plugin"
T=$C/tree/tests/dynamicemb/test_table_gpu.py
H=tests/dynamicemb/test_hybrid_split_gpu.py
E="tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py"
timeout 24 $PT $T -k schedules > $OUT/t_sched.txt 2>&1 & p1=$!
timeout 24 $PT --upsert-lab 5 $T -k "test_gpu_matches_cpu_twin" > $OUT/t_twin5.txt 2>&1 & p2=$!
timeout 24 $PT --upsert-lab 5 $T -k "not test_gpu_matches_cpu_twin and not schedules" > $OUT/t_rest5.txt 2>&1 & p3=$!
timeout 24 $PT --upsert-lab 3 $T -k "full_table or contention or duplicates" > $OUT/t_full3.txt 2>&1 & p4=$!
timeout 24 $PT --upsert-lab 5 $H > $OUT/h5.txt 2>&1 & p5=$!
timeout 24 $PT --upsert-lab 5 $E > $OUT/e5.txt 2>&1 & p6=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_sched t_twin5 t_rest5 t_full3 h5 e5; do echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A25 "^____\|^E  " $OUT/t_*.txt $OUT/h5.txt $OUT/e5.txt | head -60
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants pdl pdl+static pdl+prefetch \
  --lambdas 1.0 0.5 --dists uniform zipf --reps 3 2>&1 | tee $OUT/table_ab.txt
echo "total: $(( $(date +%s) - t0 )) s"
