#!/bin/bash
# hash37 run 2 (issue 35). Run 1 (call 1): scan_bucket_wide1 read group 1's scores from the next bucket (an index 64
# slots off): other victims (checksums differed) and DRAM misses; fixed. Here: (a) evict_bench of the fixed lab tree
# (the early fill's kernel with one fill site: run 1's ncu showed its instruction fetch stalls, no_instruction 6.5 per
# issue against 1.6), lab values 3 (main's wide scan) / 4 (one-round scan) / 5 (+ staged rows) / 6 (+ early fill) /
# 7 (+ entries one group ahead) interleaved, uniform / Zipf / dupnew / loads 0.5-1; ncu of find_or_insert's insert
# passes (units and stalls). (b) this branch's wheel (the fixed scan; default 6): the GPU table tests on the default
# path in one pytest process (test_table_gpu.py with the insert-variant agreement test over lab bits 3-7,
# test_evict_ties_gpu.py, test_table_full.py, test_hybrid_split_gpu.py).
B=53
. .carry/hash37/common.sh
eb uniform 11 26 20 4 - uniform 1 - 3,4,5,6,7
eb zipf 8 26 20 3 - zipf 1 - 3,4,5,6,7
eb dupnew 8 26 20 3 - dupnew 1 - 3,4,5,6,7
eb loads 9 26 20 3 - uniform 0.75,1 - 3,4,5,6,7
digest uniform zipf dupnew loads
ncu_units units 3,4,5,6,7 5
[ -d .carry/hash37/whl ] || { echo "no wheel carried"; exit 0; }
. .carry/hash37/setup.sh
run_tests $(( $(left) - 2 )) 1 "" tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py \
  tests/dynamicemb/test_table_full.py tests/dynamicemb/test_hybrid_split_gpu.py
digest_tests
grep -E "\[ *[0-9]+%\]" $OUT/tests.log | tail -2 | cut -c1-160
echo "total: $(( $(date +%s) - t0 )) s"
