#!/bin/bash
# hash37 run 2 (issue 35). Run 1 (call 1; call 3 repeated it on the same binary): scan_bucket_wide1 read group 1's
# scores from the next bucket (an index 64 slots off): other victims (checksums differed) and DRAM misses; fixed.
# (a) evict_bench of this branch (6a7c275c: the fill and the op's default are main's wide scan), lab values 3 (main's
# path) / 4 (the scan's loads in one round) / 5 (+ rows staged) / 6 (+ early fill, one fill site) / 7 (+ entries one
# group ahead) interleaved in one process on the same snapshots, uniform / Zipf / dupnew / loads 0.75 and 1; ncu of
# find_or_insert's insert passes at 3-7 (units, stalls). (b) this branch's wheel (same kernels): the GPU table tests
# with the insert pass forced to 7 (`--upsert-lab 15`: value 6's eviction path + the entries ahead, every policy),
# test_table_gpu.py's agreement test running 3-7 explicitly against the plain scan.
B=53
. .carry/hash37/common.sh
eb uniform 11 26 20 4 - uniform 1 - 3,4,5,6,7
eb zipf 8 26 20 3 - zipf 1 - 3,4,5,6,7
eb dupnew 8 26 20 3 - dupnew 1 - 3,4,5,6,7
eb loads 8 26 20 3 - uniform 0.75,1 - 3,4,5,6,7
digest uniform zipf dupnew loads
ncu_units units 3,4,5,6,7 5
[ -d .carry/hash37/whl ] || { echo "no wheel carried"; exit 0; }
. .carry/hash37/setup.sh
run_tests $(( $(left) - 1 )) 15 "" tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py \
  tests/dynamicemb/test_table_full.py tests/dynamicemb/test_hybrid_split_gpu.py
digest_tests
grep -E "\[ *[0-9]+%\]" $OUT/tests.log | tail -2 | cut -c1-160
echo "total: $(( $(date +%s) - t0 )) s"
