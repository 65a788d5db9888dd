#!/bin/bash
# assign37 run 3 (the final wheel: assign_lru_kernel the default for LRU assign; the variants of run 2 lab-only). (a)
# GPU tests in three processes side by side on the default path: test_table_assign_gpu.py (duplicates keep one whole
# row, missing keys untouched, scores per policy, on the default and the copiers' paths; the kernel's table = the
# copiers') and test_table_gpu.py -k assign. (b) assign_bench at dims 8 / 32 / 64, loads 0.5 / 0.75 / 1.0, uniform and
# Zipf: 1 (main's path) against 0 (the kernel), find beside them. (c) table_ab.py through the product op at loads 0.5
# and 0.75 (uniform; load 1.0 was run 2's), `pdl+copiers` against `default`, as time allows.
. .carry/assign37/common.sh
. $C/setup.sh
B=54
LOG=tests_a run_tests 23 - "duplicates_missing" tests/dynamicemb/test_table_assign_gpu.py &
LOG=tests_b run_tests 23 - "matches_copiers" tests/dynamicemb/test_table_assign_gpu.py &
LOG=tests_c run_tests 23 - "assign and not accum" tests/dynamicemb/test_table_gpu.py &
wait
digest_tests
ab dims_u 10 26 3 - uniform 0.5,0.75,1 8,32,64 1,0
ab dims_z 10 26 3 - zipf 0.5,0.75,1 8,32,64 1,0
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree timeout $(( $(left) - 1 )) python3 -P tools/dynamicemb_dev/table_ab.py \
  --variants pdl+copiers default --reps 3 --lambdas 0.5 0.75 --dists uniform --ops assign --bound \
  > $OUT/table_ab.txt 2>&1)
echo "## table_ab rc $? ($(( $(date +%s) - t0 )) s)"
cat $OUT/table_ab.txt | cut -c1-200
echo "total $(( $(date +%s) - t0 )) s"
