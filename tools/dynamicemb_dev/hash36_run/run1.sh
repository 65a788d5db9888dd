#!/bin/bash
# hash36 run 1 (issue 35, load 1.0): what limits the insert pass, and the wide eviction scan. evict_bench (uint64 /
# fp32 dim 32 / LRU, 2^26 slots, 1M keys at HKV's fill), lab values interleaved in one process: 1 = main's insert pass
# (16 warps per SM), 3 = the wide scan (a tile's score loads 64 contiguous bytes: half the L2 sector requests of the
# scan), 9 / 11 = 1 / 3 with the grid at 1 block per SM (8 warps). Equal checksums = the same evictions. Then ncu of
# the insert passes at 1 / 9 / 3 / 11: requests and sectors per unit (ncu_raw) and every unit's throughput against
# its peak with the stall reasons (ncu_units).
. .carry/hash36/common.sh
eb uniform 10 26 20 5 - uniform 1 - 1,3,9,11
eb zipf 8 26 20 3 - zipf 1 - 1,3
eb dupnew 8 26 20 3 - dupnew 1 - 1,3
eb loads 10 26 20 3 - uniform 0.5,0.75,1 - 1,3
ncu_raw raw 1,9,3,11 12
ncu_units units 1,9,3,11 4
digest uniform zipf dupnew loads
