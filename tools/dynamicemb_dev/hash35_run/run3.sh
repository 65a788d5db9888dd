#!/bin/bash
# hash35 run 3 (issue 35). evict_bench (uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's fill), lab values
# interleaved in one process: 1 = main's path; 6 / 7 = the row copiers' first pass (insert_or_assign,
# insert_and_evict, assign) at 40 / 32 warps per SM (48 / 64 registers, no spills) instead of 48 (40 registers,
# 56 / 80 bytes of spills); 5 = run 2's victim-row prefetch again, in the other order (5 before 1), to separate the
# prefetch from the kernel's layout (run 2: its insert pass was -1.2 % also on the ops it does not touch). Loads 1.0
# and 0.5, uniform and Zipf; equal checksums = the same results. Then ncu of the first passes at 1 / 6 / 7.
. .carry/hash35/common.sh
eb uniform_167 8 26 20 5 - uniform 1 - 1,6,7
eb zipf_167 8 26 20 5 - zipf 1 - 1,6,7
eb half_167 8 26 20 3 - uniform 0.5 - 1,6,7
eb uniform_531 8 26 20 5 - uniform 1 - 5,3,1
eb dupnew_51 8 26 20 5 - dupnew 1 - 5,1
ncu_mem "upsert_main" 12 1,6,7
digest uniform_167 zipf_167 half_167 uniform_531 dupnew_51
