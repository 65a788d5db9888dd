#!/bin/bash
# hash34 run 3 (issue 35): the branch's wheel (29454617: lab value 3 = the lean scan with truncated ranks). (1) The GPU
# table tests with ScoredHashTable._upsert_lab = 7 (programmatic launches + the lean scan forced for every upsert):
# the schedules' agreement test (lab 6 / 7 against the dynamic schedule at 2^20 slots), the full-table evictions
# against the CPU twin, the ties / big-score tests (scores >= 2^24 and >= 2^56: the fallback to main's scan), the
# full-table tests. (2) table_ab.py (hash_table.py's fill at 2^26 slots, 1M keys per op, fp32 values): `pdl` (main's
# default path) against `pdl+lean` on the same batches and snapshots, interleaved, at dims 32 / 8 / 64 and load 1.0,
# then Zipf and load 0.5 at dim 32 as time allows.
. .carry/hash34/setup.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
run_tests 22 7 "insert_schedules_agree or full_table_evictions or cuda or full_table" \
  tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py
digest_tests
AB="python3 -P $C/tree/tools/dynamicemb_dev/table_ab.py --variants pdl pdl+lean --reps 3"
left() { echo $(( 54 - SECONDS )); }
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(left) $AB --dims 32 8 64 --dists uniform --lambdas 1.0 \
  > $OUT/ab_dims.txt 2>&1; echo "ab_dims rc $? ($SECONDS s)")
[ $(left) -gt 9 ] && (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $(left) $AB --dims 32 --dists zipf uniform \
  --lambdas 1.0 0.5 > $OUT/ab_zipf.txt 2>&1; echo "ab_zipf rc $? ($SECONDS s)")
grep -h "^|" $OUT/ab_dims.txt $OUT/ab_zipf.txt 2>/dev/null | grep -v "^|---\|keys, load" | cut -c1-200
echo "total $SECONDS s"
