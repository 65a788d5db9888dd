#!/bin/bash
# hash36 run 2 (issue 35). Run 1: the insert pass's busiest unit is the L2's tag lookups (lts__t_tag_requests 70 % of
# peak at 16 warps per SM, 61 % at 8); the wide scan takes it to 50 % and the pass -5 to -8 % at load 1.0 (uniform,
# Zipf), same checksums, but +3 to +8 % at load 0.75 (a ~40 us pass) and +5 % on dupnew's find_or_insert (3 reps).
# Here: evict_bench at loads 0.75 / 1.0 and dupnew with 7 reps, the wide scan first (3, 1); then this branch's wheel:
# the GPU table tests with the wide scan forced for every upsert (_upsert_lab = 7), the insert-variant agreement test
# (main's scan, static, wide; buckets of 128 / 256 / 32), and table_ab.py (hash_table.py's fill and timer; 2^26 slots,
# dim 32, 1M keys) `pdl` (main's path) against `pdl+wide`, interleaved in one process, loads 0.5 / 0.75 / 1.0 uniform
# and 1.0 Zipf.
. .carry/hash36/common.sh
eb loads 8 26 20 7 - uniform 0.75,1 - 3,1
eb dupnew 6 26 20 7 - dupnew 1 - 3,1
. .carry/hash36/setup.sh
run_tests 18 7 "not insert_schedules_agree" tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py \
  tests/dynamicemb/test_table_full.py
run_tests 9 1 "insert_schedules_agree" tests/dynamicemb/test_table_gpu.py
digest_tests
tab() {
  echo "## table_ab $* ($(( $(date +%s) - t0 )) s)"
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) + 4 )) python3 tools/dynamicemb_dev/table_ab.py \
    --variants pdl pdl+wide --reps 4 "$@" 2>&1 | tee -a $OUT/table_ab.txt | grep "^|" | cut -c1-150)
}
tab --lambdas 1.0 0.75 --dists uniform
tab --lambdas 1.0 --dists zipf
tab --lambdas 0.5 --dists uniform
digest loads dupnew
