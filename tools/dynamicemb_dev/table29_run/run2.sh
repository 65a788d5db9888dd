#!/bin/bash
# table29 run 2 (issue 35, load 1.0): the per-bucket victim summary in its steady state. evict_bench (uint64 / fp32 /
# LRU, 2^26 slots, 1M keys, 5 reps) from the lab tree, variants interleaved on the same snapshots and batches, on the
# table after 16 warm-up find_or_insert ops on L6's or L7's path (the same evictions as main's path):
#   L0 = the product's insert pass (main's code); L5 = the oracle of run 1 (every summary fresh, built untimed; the
#   digest line and the 8 entries' score sectors prefetched); L6 = summaries kept across ops, flagged by the evictor
#   that could not use one or left <= 2 entries below the bound, rebuilt by vsum_refresh after the insert pass (in the
#   op's total, printed as "refresh"); L7 = L6 with the refresh of the previous op's flags on a second stream beside
#   begin_op and the first pass, joined before the insert pass. L6 / L7 prefetch as L5. Equal checksums = the same
#   evictions. Then ncu (2^24 slots, 256K keys): find_or_insert's insert pass L0 / L6 and L6's refresh.
# (Rewritten onto common.sh after the run, the same commands; the script that ran is 0adb441f's.)
. .carry/table29/common.sh
eb uniform_l6 9 26 20 5 - uniform 1 - 6,0,5
eb uniform_l7 9 26 20 5 - uniform 1 - 7,0
eb zipf_l6 10 26 20 5 - zipf 1 - 6,0
eb zipf_l7 10 26 20 5 - zipf 1 - 7,0
ncu_pass "upsert_insert_kernel|vsum_refresh" 3 0,6
digest uniform_l6 uniform_l7 zipf_l6 zipf_l7
