#!/bin/bash
# assign37 run 2: the branch wheel through the product op. table_ab.py (hash_table.py's fill and timer, 2^26 slots,
# dim 32, 1M keys, uniform and Zipf, loads 0.5 / 0.75 / 1.0): `pdl+copiers` (main's path: the row copiers' two passes)
# against `pdl` (the default: assign_lru_kernel), assign and find, with the fraction of the byte bound; then the GPU
# tests of the assign paths (test_table_assign_gpu.py, test_table_gpu.py -k assign) on the default path.
. .carry/assign37/common.sh
. $C/setup.sh
B=53
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree timeout 24 python3 -P tools/dynamicemb_dev/table_ab.py \
  --variants pdl+copiers pdl --reps 3 --lambdas 0.5 0.75 1.0 --dists uniform zipf --ops assign find --bound \
  > $OUT/table_ab.txt 2>&1)
echo "table_ab rc $? ($(( $(date +%s) - t0 )) s)"
cat $OUT/table_ab.txt | cut -c1-220
run_tests $(left) 1 "assign" tests/dynamicemb/test_table_assign_gpu.py tests/dynamicemb/test_table_gpu.py
digest_tests
echo "total $(( $(date +%s) - t0 )) s"
