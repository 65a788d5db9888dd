#!/bin/bash
# table29 run 3 (issue 35, load 1.0; prepared, not offered in session 26): 16-entry victim summaries in their steady
# state. evict_bench (uint64 / fp32 /
# LRU, 2^26 slots, 1M keys, 5 reps) from the lab tree, variants interleaved on the same snapshots and batches, on the
# table after 16 warm-up find_or_insert ops on L6's or L7's path (the same evictions as main's path):
#   L0 = the product's insert pass (main's code); L8 = run 2's L6 with 16 entries per summary (32 bytes per bucket),
#   the evictor's requests in a bitmap (a RED), vs16_refresh (a warp per bitmap word, the flagged buckets' lines
#   prefetched before the selection) after the insert pass, in the op's total ("refresh"); L9 = L8 with the refresh
#   of the previous op's requests beside begin_op and the first pass. Equal checksums = the same evictions. Then ncu
#   (2^24 slots, 256K keys): find_or_insert's insert pass L0 / L8 and L8's refresh.
. .carry/table29/common.sh
eb uniform_l8 9 26 20 5 - uniform 1 - 8,0
eb uniform_l9 9 26 20 5 - uniform 1 - 9,0
eb zipf_l8 10 26 20 5 - zipf 1 - 8,0
eb zipf_l9 10 26 20 5 - zipf 1 - 9,0
ncu_pass "upsert_insert_kernel|vs16_refresh" 3 0,8
digest uniform_l8 uniform_l9 zipf_l8 zipf_l9
