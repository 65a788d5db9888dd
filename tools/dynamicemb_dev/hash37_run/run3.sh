#!/bin/bash
# hash37 run 3 (issue 35). Run 2 (call 5; the fixed scan, checksums equal everywhere): every variant slower than main's
# path (4 +2-3 %, 5 +5-7 %, 6 +13-21 %, 7 +10-20 % on find_or_insert / insert_or_assign); ncu: the one-round scan's
# cp.async raised the L2 tag lookups 50 -> 55 %, the early fill took long scoreboard and membar down but the warps
# then waited on instruction fetch (no_instruction 1.7 -> 6.7 per issue: a warp's tiles diverge between the early and
# the full path), and 7 beat 6 by 1-3 %. Here: lab value 7 = main's wide-scan eviction path + the pending entries one
# group ahead (evict_bench of 6b1a1b76), interleaved with 3 (main's path) and 4, uniform / Zipf / dupnew / loads
# 0.75-1; then ncu of find_or_insert's insert passes: requests / sectors / instructions (3, 4, 7), units and stalls
# (3, 7).
B=53
. .carry/hash37/common.sh
eb uniform 11 26 20 5 - uniform 1 - 3,7,4
eb zipf 8 26 20 4 - zipf 1 - 3,7
eb dupnew 8 26 20 4 - dupnew 1 - 3,7
eb loads 8 26 20 4 - uniform 0.75,1 - 3,7
digest uniform zipf dupnew loads
ncu_raw raw 3,4,7 3
ncu_units units 3,7 2
echo "total: $(( $(date +%s) - t0 )) s"
