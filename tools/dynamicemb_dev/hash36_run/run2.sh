#!/bin/bash
# hash36 run 2 (issue 35): the wide eviction scan through the product op. This branch's wheel (lab bits 2-3 = 3 of
# ScoredHashTable._upsert_lab select scan_bucket_wide; the default is main's scan): the GPU table tests with the wide
# scan forced for every upsert (_upsert_lab = 7), the insert-variant agreement test (main's scan, static, wide; buckets
# of 128 / 256 / 32), then table_ab.py (hash_table.py's fill and timer; 2^26 slots, dim 32, 1M keys) with `pdl`
# (main's path) against `pdl+wide` at loads 0.5 / 0.75 / 1.0, uniform keys, interleaved in one process.
. .carry/hash36/common.sh
. .carry/hash36/setup.sh
run_tests 24 7 "not insert_schedules_agree" tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py \
  tests/dynamicemb/test_table_full.py
run_tests 10 1 "insert_schedules_agree" tests/dynamicemb/test_table_gpu.py
digest_tests
echo "## table_ab ($(( $(date +%s) - t0 )) s)"
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) + 4 )) python3 tools/dynamicemb_dev/table_ab.py \
  --variants pdl pdl+wide --lambdas 0.5 0.75 1.0 --dists uniform --reps 3 2>&1 | tee $OUT/table_ab.txt | tail -8)
echo "total: $(( $(date +%s) - t0 )) s"
