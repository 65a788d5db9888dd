#!/bin/bash
# hash33 run 1 (issue 35, load 1.0): design C, the eviction without the bucket lock (evict_insert_lf; evict_bench
# variant 3) against main's insert pass (variant 0) in one process, interleaved on the same snapshots and batches
# (uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's fill, 5 reps): uniform in both orders, Zipf hits, and
# `dupnew` (new keys ~6.4 times each: duplicates of missing keys racing for one bucket). Equal checksums (table,
# evicted pairs) = the same evictions. Then ncu of find_or_insert's insert pass (2^24 slots, 256K keys) L0 / L3.
. .carry/hash33/common.sh
eb uniform_03 9 26 20 5 - uniform 1 - 0,3
eb uniform_30 9 26 20 5 - uniform 1 - 3,0
eb zipf_03 10 26 20 5 - zipf 1 - 0,3
eb dupnew_03 9 26 20 3 - dupnew 1 - 0,3
ncu_pass "upsert_insert_kernel" 2 0,3
digest uniform_03 uniform_30 zipf_03 dupnew_03
