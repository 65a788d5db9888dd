#!/bin/bash
# hash27 run 2 (issue 35): the branch's dynamicemb wheel, whose insert pass takes the static group schedule by
# default for find_or_insert and insert_or_assign (main's dynamic one for the other ops). GPU tests in parallel
# processes: this branch's test_table_gpu.py (with test_gpu_full_table_insert_schedules_agree: the schedules against
# each other at the scale where they differ) on the default path and with the static schedule forced for every op
# (_upsert_lab 5 = pdl + static), the hybrid split, eviction ties and the full table; then table_ab.py in one
# process: main's path (pdl + dynamic: main's insert kernel for every op) against the default (pdl) and pdl + static
# at loads 1.0 and 0.5, uniform and Zipf.
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
timeout 23 $PT $T -k schedules > $OUT/t_sched.txt 2>&1 & p1=$!
timeout 23 $PT $T -k test_gpu_matches_cpu_twin > $OUT/t_twin.txt 2>&1 & p2=$!
timeout 23 $PT $T -k row_writer > $OUT/t_rw.txt 2>&1 & p3=$!
timeout 23 $PT $T -k "not test_gpu_matches_cpu_twin and not schedules and not row_writer" > $OUT/t_rest.txt 2>&1 & p4=$!
timeout 23 $PT --upsert-lab 5 $T -k "full_table or contention or duplicates" > $OUT/t_static.txt 2>&1 & p5=$!
timeout 23 $PT $H > $OUT/h.txt 2>&1 & p6=$!
timeout 23 $PT $E > $OUT/e.txt 2>&1 & p7=$!
timeout 23 $PT --upsert-lab 5 $E > $OUT/e_static.txt 2>&1 & p8=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6 $p7 $p8; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_sched t_twin t_rw t_rest t_static h e e_static; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A25 "^____\|^E  " $OUT/t_*.txt $OUT/h.txt $OUT/e*.txt | head -60
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants pdl+dynamic pdl pdl+static \
  --lambdas 1.0 0.5 --dists uniform zipf --reps 3 2>&1 | tee $OUT/table_ab.txt
echo "total: $(( $(date +%s) - t0 )) s"
