#!/bin/bash
# hash26 run 3: the default path with the variant run 2 chose (ScoredHashTable._upsert_lab's default): the GPU
# tests of the table and the hybrid table on the default path (test_table_gpu.py whole in 3 processes, the
# hybrid split twice, evict ties + table_full, the storage tiers), then hash_table.py at load 1.0 (uniform) with
# main26's wheel and this one (one process each, the headline's command at 2 reps), then table_ab (the default
# against pdl only) at loads 1.0 / 0.5.
B=47
. .carry/hash26/setup.sh
rm -rf /tmp/site_main26h; python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_main26h \
  .carry/main26/whl/dynamicemb-*.whl
timeout 22 $PT $TG -k "test_gpu_matches_cpu_twin" > $OUT/t_twin.txt 2>&1 & p1=$!
timeout 22 $PT $TG -k "row_writer" > $OUT/t_rw.txt 2>&1 & p2=$!
timeout 22 $PT $TG -k "not test_gpu_matches_cpu_twin and not row_writer" > $OUT/t_rest.txt 2>&1 & p3=$!
timeout 22 $PT $H > $OUT/h1.txt 2>&1 & p4=$!
timeout 22 $PT $H > $OUT/h2.txt 2>&1 & p5=$!
timeout 22 $PT $E > $OUT/e.txt 2>&1 & p6=$!
timeout 22 $PT tests/dynamicemb/test_storage_gpu.py > $OUT/s.txt 2>&1 & p7=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6 $p7; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_twin t_rw t_rest h1 h2 e s; do echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A25 "^____\|Error\|assert" $OUT/t_*.txt $OUT/h*.txt $OUT/e.txt $OUT/s.txt | head -50
HT="benchmarks/hash_table.py --dims 32 --capacity 67108864 --reps 2 --fill hkv --lambdas 1.0 --dists uniform"
echo "## main26"
PYTHONPATH=/tmp/site_main26h timeout 8 python3 $HT 2>&1 | tee $OUT/ht_main.txt | grep "^dim \|^| 32"
echo "## hash26"
PYTHONPATH=$S timeout 8 python3 $HT 2>&1 | tee $OUT/ht_hash26.txt | grep "^dim \|^| 32"
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants pdl DEFAULT --lambdas 1.0 0.5 \
  --dists uniform --reps 3 2>&1 | tee $OUT/table_ab.txt
echo "total: $(( $(date +%s) - t0 )) s"
