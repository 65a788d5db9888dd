#!/bin/bash
# hash33 run 3 (issue 35, load 1.0): run 2 measured design C (announce + fence.sc + digest re-read) +16 to +19 % on
# the insert pass and the lock-free claim alone (variant 4, no duplicate protocol) -5 to -7 %: the re-read cost 626
# warp instructions per group of 8 keys at 11 threads per instruction. Variant 5 replaces the announce by an intent
# word (the bucket's lock word, zeroed before each op by evict_bench: bit digest & 7 by an atomicOr issued at entry,
# read after the claim; the first of a bit goes on lock-free and flags done, a later one waits for that flag, locks
# bit 16 among the later ones and rescans). evict_bench (uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's
# fill, 5 reps), L0 main / L4 bare / L5 intent interleaved in one process (L4 not on dupnew: it would insert a repeated
# missing key twice); equal checksums = the same evictions. Then ncu of find_or_insert's insert pass L0 / L4 / L5.
. .carry/hash33/common.sh
eb uniform_045 9 26 20 5 - uniform 1 - 0,4,5
eb uniform_540 9 26 20 5 - uniform 1 - 5,4,0
eb zipf_045 10 26 20 5 - zipf 1 - 0,4,5
eb dupnew_053 9 26 20 5 - dupnew 1 - 0,5,3
ncu_pass "upsert_insert_kernel" 3 0,4,5
digest uniform_045 uniform_540 zipf_045 dupnew_053
