#!/bin/bash
# hash34 run 1 (issue 35, load 1.0): the lean eviction scan (lab value 3: scan_bucket_lean, ~155 warp instructions per
# 16-slot chunk against main's ~212, counted from the SASS) against main's scan (lab value 1: the same dynamic
# schedule), interleaved in one process (evict_bench, uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's fill,
# 5 reps); equal checksums = the same evictions (dupnew: duplicates of missing keys); load 0.5: nothing evicts. Then
# ncu of find_or_insert's insert pass L1 / L3 (2^24 slots, 256K keys): warp instructions and time.
. .carry/hash34/common.sh
eb uniform_13 9 26 20 5 - uniform 1 - 1,3
eb uniform_31 9 26 20 5 - uniform 1 - 3,1
eb zipf_13 10 26 20 5 - zipf 1 - 1,3
eb dupnew_13 9 26 20 5 - dupnew 1 - 1,3
eb half_13 8 26 20 3 - uniform 0.5 - 1,3
ncu_pass "upsert_insert_kernel" 2 1,3
digest uniform_13 uniform_31 zipf_13 dupnew_13 half_13
