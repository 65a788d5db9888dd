#!/bin/bash
# hash35 run 4 (issue 35): the insert pass's time against its warps in flight. evict_bench (uint64 / fp32 dim 32 /
# LRU, 2^26 slots, 1M keys at HKV's fill), main's insert pass at its grid of 2 blocks per SM (lab value 1, 16 warps)
# against the same kernel with the grid capped at 1 block per SM (8: 8 warps) and 1.5 (9: 12 warps on average),
# interleaved in one process; uniform and Zipf. Time x warps constant = latency-bound per warp (more warps would pay
# in proportion); less than proportional = a shared limit (locks, atomics, L2) that more warps would not lift.
. .carry/hash35/common.sh
eb uniform_189 8 26 20 5 - uniform 1 - 1,8,9
eb zipf_189 8 26 20 3 - zipf 1 - 1,8,9
eb dupnew_189 8 26 20 3 - dupnew 1 - 1,8,9
digest uniform_189 zipf_189 dupnew_189
