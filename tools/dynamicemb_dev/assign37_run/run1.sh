#!/bin/bash
# assign37 run 1 (issue 35: assign at 2x HKV): assign_bench (uint64 / fp32 / LRU, 2^26 slots, 1M keys, HKV's fill),
# variants interleaved in one process: 1 = main's path (the row copiers' first pass + insert pass), 0 = assign_lru_kernel
# (the lean kernel: 64 warps/SM, blocks of 32 keys, row prefetch after a digest match), 2 = 0 with the row prefetched
# before the probe, 3 / 6 = blocks of 256 / 64 threads, 7 = 48 warps per SM, 4 = relaxed publish (what-if), 5 = no slot
# lock (what-if; rows may tear under duplicates); find beside them. ncu of main's first pass and the lean kernel. The
# branch wheel's assign tests (test_table_assign_gpu.py: both paths) if the wheel is in the carry.
. .carry/assign37/common.sh
ab uniform 11 26 5 - uniform 0.5,0.75,1 32 1,0,2,3,6,7,4,5
ab zipf 10 26 5 - zipf 0.5,1 32 1,0,2,6,7,5
ncu_ab u 1,0
if [ -d $C/whl ]; then
  . $C/setup.sh
  B=54
  run_tests $(left) 1 "assign" tests/dynamicemb/test_table_assign_gpu.py tests/dynamicemb/test_table_gpu.py
  digest_tests
fi
echo "total $(( $(date +%s) - t0 )) s"
