#!/bin/bash
# assign37 run 2. (a) assign_bench (2^26 slots, dim 32, 1M keys, HKV's fill), variants interleaved in one process:
# 1 = main's path, 0 = assign_lru_kernel (run 1's lean kernel), 10 = 0 + each tile prefetches into L2 the digest lines
# of the key half a wave of resident keys ahead (and so loads that key), 13 / 14 = the same a whole / a quarter wave
# ahead, 11 = the lock CAS on every digest match (no load before it), 12 = 10 + 11, 15 = 10 without the slot lock
# (what-if), 5 = no slot lock (what-if). (b) The branch wheel (variants 10-12 selectable) through the product op:
# table_ab.py `pdl+copiers` (main's path) against `pdl` (the lean kernel) and its variants, assign, uniform and Zipf,
# load 1.0, with the fraction of the byte bound. (c) ncu of 0 and 10. (d) the variants' GPU test against the copiers.
. .carry/assign37/common.sh
ab uniform 10 26 5 - uniform 0.5,0.75,1 32 1,0,10,13,14,11,12,15,5
ab zipf 8 26 5 - zipf 0.5,1 32 1,0,10,11,12
. $C/setup.sh
B=54
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME:$C/tree timeout 12 python3 -P tools/dynamicemb_dev/table_ab.py \
  --variants pdl+copiers pdl pdl+ahead pdl+dcas pdl+ahead_dcas --reps 3 --lambdas 1.0 --dists uniform zipf \
  --ops assign --bound > $OUT/table_ab.txt 2>&1)
echo "## table_ab rc $? ($(( $(date +%s) - t0 )) s)"
cat $OUT/table_ab.txt | cut -c1-250
ncu_ab v 0,10
run_tests $(left) - "matches_copiers" tests/dynamicemb/test_table_assign_gpu.py
digest_tests
echo "total $(( $(date +%s) - t0 )) s"
