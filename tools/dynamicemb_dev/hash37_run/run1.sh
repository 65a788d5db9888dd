#!/bin/bash
# hash37 run 1 (issue 35, load 1.0): fewer round trips in the eviction's chain. evict_bench (uint64 / fp32 dim 32 /
# LRU, 2^26 slots, 1M keys at HKV's fill), lab values interleaved in one process on the same snapshots: 3 = main's
# insert pass (the wide scan: two rounds of loads under the lock), 4 = scan_bucket_wide1 (the scan's 18 loads in one
# round: group 1's scores staged into shared memory by cp.async), 5 = 4 + the caller's row and insert_and_evict's
# victim row staged in the exchange's round trip, 6 = 5 + the early fill (row, score, digest written in the exchange's
# round trip when no slot has the key's digest; the caller's row staged when the path starts), 7 = 6 + the pending
# entries one group ahead (cp.async at the group's start). Equal checksums = the same evictions and rows. Then ncu of
# find_or_insert's insert passes at 3-7: every unit's throughput and the stall reasons.
. .carry/hash37/common.sh
eb uniform 11 26 20 4 - uniform 1 - 3,4,5,6,7
eb zipf 8 26 20 3 - zipf 1 - 3,4,5,6,7
eb dupnew 8 26 20 3 - dupnew 1 - 3,4,5,6,7
eb loads 9 26 20 3 - uniform 0.5,0.75,1 - 3,4,5,6,7
ncu_units units 3,4,5,6,7 5
digest uniform zipf dupnew loads
