#!/bin/bash
# hash24 run 1: the upsert's programmatic launches (ScoredHashTable._upsert_lab = 1) on main's common/pdl.cuh, and
# the insert pass's lab variants nrc / pair (bits 2 / 4; the wheel is a dev build).
# GPU tests with the option forced on (test_table_gpu.py whole in 4 processes, test_hybrid_split_gpu.py whole twice)
# and off (test_hybrid_split_gpu.py once), in parallel; then table_ab (main / variants in one process).
B=44
. .carry/hash24/setup.sh
timeout 26 $PT --upsert-lab 1 $T -k test_gpu_matches_cpu_twin > $OUT/t_twin.txt 2>&1 & p1=$!
timeout 26 $PT --upsert-lab 1 $T -k "row_writer and not insert_or_assign" > $OUT/t_rw_assign.txt 2>&1 & p2=$!
timeout 26 $PT --upsert-lab 1 $T -k "row_writer and insert_or_assign" > $OUT/t_rw_ioa.txt 2>&1 & p3=$!
timeout 26 $PT --upsert-lab 1 $T -k "not test_gpu_matches_cpu_twin and not row_writer" > $OUT/t_rest.txt 2>&1 & p4=$!
timeout 26 $PT --upsert-lab 1 $H > $OUT/h_on1.txt 2>&1 & p5=$!
timeout 26 $PT --upsert-lab 1 $H > $OUT/h_on2.txt 2>&1 & p6=$!
timeout 26 $PT --upsert-lab 0 $H > $OUT/h_off.txt 2>&1 & p7=$!
# pdl + nrc (the nrc instances serve uint64 / fp32 / LRU tables of a dev build)
timeout 26 $PT --upsert-lab 3 tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py \
  > $OUT/e_nrc.txt 2>&1 & p8=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6 $p7 $p8; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_twin t_rw_assign t_rw_ioa t_rest h_on1 h_on2 h_off e_nrc; do echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A30 "^____\|Error\|assert" $OUT/*.txt | head -80
# load 1.0: pdl and the insert-pass lab variants (dev wheel); load 0.5: pdl only (no evictions there)
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants main pdl nrc pair nrc+pair \
  --lambdas 1.0 --dists uniform --reps 3 2>&1 | tee $OUT/table_ab.txt
PYTHONPATH=$S:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants main pdl \
  --lambdas 0.5 --dists uniform --reps 3 2>&1 | tee -a $OUT/table_ab.txt
# main22's wheel (another process, same tool): does this wheel's option-off path time as main's?
rm -rf /tmp/site_main24; python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_main24 \
  .carry/main22/whl/dynamicemb-*.whl
PYTHONPATH=/tmp/site_main24:$C:benchmarks timeout $(left) python3 $C/table_ab.py --variants main --lambdas 1.0 \
  --dists uniform --reps 3 2>&1 | tee -a $OUT/table_ab.txt
echo "total: $(( $(date +%s) - t0 )) s"
