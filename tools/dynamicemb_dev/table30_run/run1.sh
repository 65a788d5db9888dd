#!/bin/bash
# table30 run 1 (issue 35, load 1.0): the victim summary kept up by the evicting insert itself (no refresh kernel).
# evict_bench (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 5 reps) from tree30.py's lab tree, variants interleaved on
# the same snapshots and batches, on the table after 16 warm-up find_or_insert ops on the listed lab's path (the same
# evictions as main's): L0 = the product's insert pass (main's code); L10 = the summary of chunk minima (bound: the
# least second rank), L11 = two per chunk (bound: the least third rank), both rebuilt by the evictor that could not
# use the summary; L6 = table29's summary with its refresh kernel (reference). Equal checksums = the same evictions.
# Then the count build (self scans / summary uses per op) and ncu of find_or_insert's insert pass (2^24 slots, 256K
# keys) L0 / L10 and L0 / L11.
. .carry/table30/common.sh
chmod +x $C/eb_cnt
eb uniform_l10 9 26 20 5 - uniform 1 - 10,0
eb uniform_l11 9 26 20 5 - uniform 1 - 11,0
eb zipf_l10 10 26 20 5 - zipf 1 - 10,0
eb zipf_l11 10 26 20 5 - zipf 1 - 11,0
eb uniform_l6 9 26 20 3 - uniform 1 - 6,0
for L in 10 11; do
  echo "## counts L$L"
  timeout 8 $C/eb_cnt 26 20 1 - uniform 1 - $L > $OUT/count_l$L.txt 2>&1
  grep "^t30\|^summaries\|^find_or_insert\|^insert_or_assign\|^insert_and_evict" $OUT/count_l$L.txt | head -12
done
ncu_pass "upsert_insert_kernel" 2 0,10
[ -f $OUT/ncu.csv.gz ] && mv $OUT/ncu.csv.gz $OUT/ncu_l10.csv.gz
ncu_pass "upsert_insert_kernel" 2 0,11
digest uniform_l10 uniform_l11 zipf_l10 zipf_l11 uniform_l6
