#!/bin/bash
# hash27 run 3 (only if the lead offers one): run 2's wheel; the table GPU tests that run 2's 23 s caps cut (no
# failure among those that ran): test_table_gpu.py's row-writer cases on the default path, and the full-table /
# contention / duplicates cases with the static schedule forced for every op (_upsert_lab 5), split over processes.
C=.carry/hash27
S=/tmp/site_hash27
t0=$(date +%s)
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
rm -rf $S; python3 -m pip install -q --no-deps --no-index --no-compile --target $S $C/whl/dynamicemb-*.whl
export PYTHONPATH=$S:$C
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -p upsert_lab_plugin"
T=$C/tree/tests/dynamicemb/test_table_gpu.py
timeout 40 $PT $T -k "row_writer and not insert_or_assign" > $OUT/t_rw1.txt 2>&1 & p1=$!
timeout 40 $PT $T -k "row_writer and insert_or_assign" > $OUT/t_rw2.txt 2>&1 & p2=$!
timeout 40 $PT --upsert-lab 5 $T -k "full_table" > $OUT/t_static1.txt 2>&1 & p3=$!
timeout 40 $PT --upsert-lab 5 $T -k "contention" > $OUT/t_static2.txt 2>&1 & p4=$!
timeout 40 $PT --upsert-lab 5 $T -k "duplicates and not row_writer" > $OUT/t_static3.txt 2>&1 & p5=$!
timeout 40 $PT --upsert-lab 5 $T -k "row_writer" > $OUT/t_static4.txt 2>&1 & p6=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6; do wait $p; echo "rc $?"; done
for f in t_rw1 t_rw2 t_static1 t_static2 t_static3 t_static4; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A25 "^____\|^E  " $OUT/t_*.txt | head -60
echo "total: $(( $(date +%s) - t0 )) s"
