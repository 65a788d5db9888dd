#!/bin/bash
# hash35 run 3 (issue 35): the branch's dynamicemb wheel (lab values reachable through ScoredHashTable._upsert_lab:
# 7 = value 3, the eviction's lock CAS and victim exchange relaxed; 9 = value 4, 3 + the first pass's probe without
# acquires; 11 = value 5, insert_and_evict's victim row prefetched; 1 = main's path). GPU tests under 7 / 9 / 11 (the
# LRU full-table, duplicate and tie cases against the CPU twin), then table_ab in one process at load 1.0, dims 8 / 32
# / 64: pdl+dynamic (main's path) against the lab values.
t0=$(date +%s)
. .carry/hash35/setup.sh
OUT=${OUT:-/tmp/out_hash35}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
K="lru or hot_missing or found_of or victims_in or evict_like"
F="tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py"
run_tests 20 7 tests7.log "$K" $F &
run_tests 20 9 tests9.log "$K" $F &
run_tests 20 11 tests11.log "($K) and (insert_and_evict or victims_in or evict_like)" $F &
wait
echo "tests: $(( $(date +%s) - t0 )) s"
cd $C/tree && PYTHONPATH=/tmp/site_hash35 timeout $(( 52 - $(date +%s) + t0 )) \
  python3 -P tools/dynamicemb_dev/table_ab.py --variants pdl+dynamic pdl+relaxed pdl+relaxed1 --lambdas 1.0 \
  --dists uniform --dims 32 8 64 --reps 3 \
  | tee $OUT/table_ab.txt
cd $R
digest_tests tests7.log tests9.log tests11.log
echo "total: $(( $(date +%s) - t0 )) s"
