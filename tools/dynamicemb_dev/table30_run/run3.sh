#!/bin/bash
# table30 run 3 (issue 35, load 1.0). Run 2: listing the flagged buckets (L13) did not shorten table29's refresh
# (44.7 us = L6's sweep 44.8): it is the rebuild's ~380 warp instructions per bucket. Here:
#   L14 = L13 with vsum_build_fast (each lane sorts its 4 ranks once, 9 rounds of one redux + a pop);
#   L15 = L14 + the guessed victim (the summary's next entry) claimed in the summary scan's round trip (lab 12's
#   early claim, without the self scan); L13 and L0 (main's insert pass) in the same process, warm-up on L6's path.
# evict_bench (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 5 reps), the count build for L15, ncu of L14 / L15's insert
# pass and refresh against L0's insert pass (2^24 slots, 256K keys).
. .carry/table30/common.sh
chmod +x $C/eb_cnt
eb uniform_l14 12 26 20 5 - uniform 1 - 14,15,13,0
eb zipf_l14 10 26 20 5 - zipf 1 - 14,15,0
echo "## counts L15"
timeout 8 $C/eb_cnt 26 20 1 - uniform 1 - 15 > $OUT/count_l15.txt 2>&1
grep "^t30\|^summaries\|^find_or_insert" $OUT/count_l15.txt | head -6
ncu_pass "upsert_insert_kernel|vsum_refresh_list" 5 14,15,0
digest uniform_l14 zipf_l14
