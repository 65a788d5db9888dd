#!/bin/bash
# hash24 run 2: the product wheel (programmatic launches on by default; no score re-read of an LRU victim).
# GPU tests on the default path (test_table_gpu.py whole in 4 processes, test_hybrid_split_gpu.py twice,
# test_evict_ties_gpu.py + test_table_full.py) and test_hybrid_split_gpu.py with plain launches, in parallel; then
# hash_table.py at load 1.0 with main22's wheel and this one (same script, one process each), then table_ab (pdl
# against plain launches in this wheel) at 1.0 and 0.5.
B=44
. .carry/hash24/setup.sh
rm -rf /tmp/site_main24
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_main24 .carry/main22/whl/dynamicemb-*.whl
timeout 25 $PT $T -k test_gpu_matches_cpu_twin > $OUT/t_twin.txt 2>&1 & p1=$!
timeout 25 $PT $T -k "row_writer and not insert_or_assign" > $OUT/t_rw_assign.txt 2>&1 & p2=$!
timeout 25 $PT $T -k "row_writer and insert_or_assign" > $OUT/t_rw_ioa.txt 2>&1 & p3=$!
timeout 25 $PT $T -k "not test_gpu_matches_cpu_twin and not row_writer" > $OUT/t_rest.txt 2>&1 & p4=$!
timeout 25 $PT $H > $OUT/h_on1.txt 2>&1 & p5=$!
timeout 25 $PT $H > $OUT/h_on2.txt 2>&1 & p6=$!
timeout 25 $PT --upsert-lab 0 $H > $OUT/h_off.txt 2>&1 & p7=$!
timeout 25 $PT tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py > $OUT/e_ties.txt 2>&1 & p8=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6 $p7 $p8; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_twin t_rw_assign t_rw_ioa t_rest h_on1 h_on2 h_off e_ties; do echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A30 "^____\|Error\|assert" $OUT/*.txt | head -80
HT="benchmarks/hash_table.py --dims 32 --capacity 67108864 --reps 3 --fill hkv --lambdas 1.0 --dists uniform"
echo "## main22"
PYTHONPATH=/tmp/site_main24 timeout $(left) python3 $HT 2>&1 | tee $OUT/ht_main.txt | grep "^dim \|^| 32"
echo "## hash24"
PYTHONPATH=$S timeout $(left) python3 $HT 2>&1 | tee $OUT/ht_hash24.txt | grep "^dim \|^| 32"
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants main pdl --lambdas 1.0 0.5 \
  --dists uniform --reps 3 2>&1 | tee $OUT/table_ab.txt
echo "total: $(( $(date +%s) - t0 )) s"
