#!/bin/bash
# table30 run 4 (issue 35, load 1.0). Run 3: vsum_build_fast took the refresh from 44.5 to ~35 us (L14 against L0:
# find_or_insert +0.8 %, insert_or_assign +2.5 %, insert_and_evict 0); the refresh is now latency / byte bound. Here,
# all on L14's path (warm-up on L6's), L0 = main's insert pass in the same process:
#   L16 = L14 flagging a summary only when its last entry is taken (kVsumRefreshAt 1 instead of 3): fewer refreshes,
#   more fallback scans; L17 = L14 with the list entries and lines of 3 buckets ahead in flight in the refresh.
# evict_bench (uint64 / fp32 / LRU, 2^26 slots, 1M keys, 5 reps), then ncu of the insert pass and refresh of L14 /
# L16 / L17 (2^24 slots, 256K keys).
. .carry/table30/common.sh
eb uniform_l16 12 26 20 5 - uniform 1 - 14,16,17,0
eb zipf_l16 12 26 20 5 - zipf 1 - 14,16,17,0
ncu_pass "upsert_insert_kernel|vsum_refresh_list" 6 14,16,17
digest uniform_l16 zipf_l16
