#!/bin/bash
# hash37 run 1 (issue 35, load 1.0): fewer round trips in the eviction's chain. evict_bench (uint64 / fp32 dim 32 /
# LRU, 2^26 slots, 1M keys at HKV's fill), lab values interleaved in one process on the same snapshots: 3 = main's
# insert pass (the wide scan, two rounds of loads under the lock), 4 = scan_bucket_wide1 (the wide scan's 18 loads in
# one round: group 1's scores staged into shared memory by cp.async). Equal checksums = the same evictions. Then ncu
# of the insert passes (find_or_insert, insert_or_assign) at 3 / 4: every unit's throughput and the stall reasons.
. .carry/hash37/common.sh
eb uniform 10 26 20 5 - uniform 1 - 3,4
eb zipf 8 26 20 3 - zipf 1 - 3,4
eb dupnew 8 26 20 3 - dupnew 1 - 3,4
eb loads 9 26 20 3 - uniform 0.5,0.75,1 - 3,4
ncu_units units 3,4 4
digest uniform zipf dupnew loads
