#!/bin/bash
# hash37 run 2 (issue 35): this branch's wheel, whose insert pass defaults to the early fill (_upsert_lab bits 2-4 = 6:
# the wide scan's loads in one round, the rows staged in shared memory, the early fill; main's path = 3, `pdl+wide`).
# The GPU table tests on the default path (test_table_gpu.py with the insert-variant agreement test over 3 / 4 / 5 / 6,
# test_evict_ties_gpu.py, test_table_full.py, test_hybrid_split_gpu.py) in one pytest process; then table_ab.py
# (hash_table.py's fill and timer; 2^26 slots, dim 32, 1M keys, load 1.0) main's path (`pdl+wide`) against the
# default (`pdl`), interleaved in one process, uniform then Zipf.
B=52
. .carry/hash37/common.sh
. .carry/hash37/setup.sh
run_tests $(( $(left) - 17 )) 1 "" tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py \
  tests/dynamicemb/test_table_full.py tests/dynamicemb/test_hybrid_split_gpu.py
digest_tests
grep -E "\[ *[0-9]+%\]" $OUT/tests.log | tail -3 | cut -c1-160
tab() {
  echo "## table_ab $* ($(( $(date +%s) - t0 )) s)"
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) + 3 )) python3 tools/dynamicemb_dev/table_ab.py \
    --variants pdl+wide pdl --reps 3 "$@" 2>&1 | tee -a $OUT/table_ab.txt | grep "^|" | cut -c1-150)
}
tab --lambdas 1.0 --dists uniform
[ $(left) -gt 7 ] && tab --lambdas 1.0 --dists zipf
echo "total: $(( $(date +%s) - t0 )) s"
