#!/bin/bash
# table30 run 2 (issue 35, load 1.0). Run 1 (lab 10 / 11, the summary rebuilt by the evictor) was slower than main's
# insert pass: every warp whose 8 tiles mix the summary path and the self scan issues both. Here:
#   L13 = table29's L6 (the evictor flags a used-up summary, the insert pass as L6's) with the flagged buckets
#   appended to a list and a refresh of a warp per listed bucket (6 blocks of 256 per SM, the next bucket's lines
#   prefetched) instead of L6's sweep of all 524K summaries; L6 and L0 in the same process (warm-up on L6's path);
#   L12 = L11 with the guessed victim claimed in the summary scan's round trip (information; same checksums wanted).
# evict_bench (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 5 reps), the count build for L12, ncu of L13's insert pass
# and refresh against L0's insert pass (2^24 slots, 256K keys).
. .carry/table30/common.sh
chmod +x $C/eb_cnt
eb uniform_l13 10 26 20 5 - uniform 1 - 13,6,0
eb zipf_l13 10 26 20 5 - zipf 1 - 13,0
eb uniform_l12 9 26 20 3 - uniform 1 - 12,0
echo "## counts L12"
timeout 8 $C/eb_cnt 26 20 1 - uniform 1 - 12 > $OUT/count_l12.txt 2>&1
grep "^t30\|^summaries\|^find_or_insert" $OUT/count_l12.txt | head -6
ncu_pass "upsert_insert_kernel|vsum_refresh_list" 3 13,0
digest uniform_l13 zipf_l13 uniform_l12
