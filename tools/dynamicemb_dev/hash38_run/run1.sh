#!/bin/bash
# hash38 run 1 (issue 35): the eviction scan's bucket staged in shared memory by TMA bulk copies (evict_bench lab
# values: 3 = main's insert pass (wide scan + the tile's 9 L2 line prefetches before the lock), 4 = staged (the lead's
# two cp.async.bulk of 1 KB scores + 128 B digests after the lock, prefetch kept), 5 = 4 without the prefetch, 6 =
# main's without the prefetch (hash37's prepared run 4: request- vs latency-bound), 7 = 4 with one bulk L2 prefetch).
# Count (per evicting key, L2 requests): main ~36 (scan 18, prefetch 9); 4: scan 2-9 (if the bulk copy is per line),
# 5: -9 more, 6: -9. Then ncu: all-source L2 requests / tag lookups per op (3-7) and units + stalls (3, 4, 5); then
# the branch's wheel's GPU tests on its default path (the staged scan, = lab 4, with pdl: _upsert_lab 1) and the
# schedules' agreement test (all values vs the plain scan).
B=54
. .carry/hash38/common.sh
eb uniform 12 26 20 7 - uniform 1 - 3,4,5,6,7
eb zipf 8 26 20 5 - zipf 1 - 3,4,5,7
eb dupnew 8 26 20 5 - dupnew 1 - 3,4,5
eb loads 9 26 20 4 - uniform 0.5,0.75,1 - 3,4,5
digest uniform zipf dupnew loads
ncu_raw raw 3,4,5,6,7 5
ncu_units units 3,4,5 3
if [ -d $C/whl ]; then
  . $C/setup.sh
  run_tests 12 1 "schedules_agree" tests/dynamicemb/test_table_gpu.py
  run_tests $(( $(left) - 1 )) 1 "not schedules_agree" tests/dynamicemb/test_evict_ties_gpu.py tests/dynamicemb/test_table_full.py \
    tests/dynamicemb/test_table_gpu.py
  digest_tests
fi
echo "total: $(( $(date +%s) - t0 )) s"
