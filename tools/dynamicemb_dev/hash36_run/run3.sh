#!/bin/bash
# hash36 run 3 (issue 35), the final wheel (the wide eviction scan is the insert pass's default; main's scan is
# `_upsert_lab` bits 2-3 = 1, table_ab variant `dynamic`): the GPU table tests on the default path (test_table_gpu.py
# incl. the insert-variant agreement test, test_evict_ties_gpu.py, test_table_full.py, test_hybrid_split_gpu.py) in
# one pytest process; then table_ab.py (hash_table.py's fill and timer; 2^26 slots, dim 32, 1M keys, load 1.0
# uniform, then Zipf if time is left) with main's path (`pdl+dynamic`) and the default (`pdl`) interleaved in one
# process.
B=52
. .carry/hash36/common.sh
. .carry/hash36/setup.sh
run_tests $(( $(left) - 10 )) 1 "" tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py \
  tests/dynamicemb/test_table_full.py tests/dynamicemb/test_hybrid_split_gpu.py
digest_tests
grep -E "\[ *[0-9]+%\]" $OUT/tests.log | tail -4 | cut -c1-160
tab() {
  echo "## table_ab $* ($(( $(date +%s) - t0 )) s)"
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) + 3 )) python3 tools/dynamicemb_dev/table_ab.py \
    --variants pdl+dynamic pdl --reps 3 "$@" 2>&1 | tee -a $OUT/table_ab.txt | grep "^|" | cut -c1-150)
}
tab --lambdas 1.0 --dists uniform
[ $(left) -gt 7 ] && tab --lambdas 1.0 --dists zipf
echo "total: $(( $(date +%s) - t0 )) s"
