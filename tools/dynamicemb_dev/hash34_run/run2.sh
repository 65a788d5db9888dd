#!/bin/bash
# hash34 run 2 (issue 35, load 1.0). Run 1: the lean scan unrolled cut the insert pass's warp instructions 5.5 % and
# left its time unchanged (no-instruction stalls 1.54 -> 2.92 per issue). Here two compact forms against main's scan
# (lab value 1), interleaved in one process each (evict_bench, uint64 / fp32 dim 32 / LRU, 2^26 slots, 1M keys at
# HKV's fill, 5 reps): eb_lab = 29454617 (B: truncated ranks, no range check and no 64-bit path in the chunk loop,
# the victim's full score checked beside its claim, fallback to main's scan), eb_lab2 = 7e44ba4c (A: run 1's lean
# scan not unrolled). Equal checksums = the same evictions. ncu of find_or_insert's insert pass for both. Then, if
# the wheel is here (29454617), the GPU table tests with ScoredHashTable._upsert_lab = 7 (B forced for every upsert).
. .carry/hash34/common.sh
chmod +x $C/eb_lab2
eb2() { local name=$1 to=$2; shift 2; echo "## $name"; timeout $to $C/eb_lab2 "$@" 2>&1 | tee $OUT/$name.txt | grep -v "^keys"; }
eb B_uniform_13 9 26 20 5 - uniform 1 - 1,3
eb2 A_uniform_13 9 26 20 5 - uniform 1 - 1,3
eb B_uniform_31 9 26 20 5 - uniform 1 - 3,1
eb B_zipf_13 10 26 20 5 - zipf 1 - 1,3
eb B_dupnew_13 9 26 20 5 - dupnew 1 - 1,3
eb2 A_dupnew_13 9 26 20 5 - dupnew 1 - 1,3
eb B_half_13 8 26 20 3 - uniform 0.5 - 1,3
ncu_pass "upsert_insert_kernel" 2 1,3
NCU_BIN=eb_lab2 NCU_TAG=_A ncu_pass "upsert_insert_kernel" 2 1,3
digest B_uniform_13 A_uniform_13 B_uniform_31 B_zipf_13 B_dupnew_13 A_dupnew_13 B_half_13
if ls $C/whl/dynamicemb-*.whl > /dev/null 2>&1 && [ $(left) -gt 20 ]; then
  . .carry/hash34/setup.sh
  run_tests $(( $(left) - 4 )) 7 "insert_schedules_agree or full_table_evictions or cuda or full_table" \
    tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py
  digest_tests
fi
echo "total: $(( $(date +%s) - t0 )) s"
