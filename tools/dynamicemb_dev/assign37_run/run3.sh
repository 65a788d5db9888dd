#!/bin/bash
# assign37 run 3 (the final wheel: the default path is `ScoredHashTable._upsert_lab`'s class value). (a) GPU tests in
# three processes side by side: test_table_assign_gpu.py (duplicates keep one whole row, missing keys untouched,
# scores per policy; the default, the copiers and the selectable kernel variants, in two halves) and test_table_gpu.py
# -k assign, all on the default path. (b) assign_bench at dims 8 / 32 / 64, loads 0.5 / 0.75 / 1.0, uniform and Zipf:
# 1 (main's path) against VAR (the default's kernel variant) and find.
VAR=${VAR:-10}
. .carry/assign37/common.sh
. $C/setup.sh
B=54
LOG=tests_a run_tests 26 - "duplicates_missing" tests/dynamicemb/test_table_assign_gpu.py &
LOG=tests_b run_tests 26 - "matches_copiers" tests/dynamicemb/test_table_assign_gpu.py &
LOG=tests_c run_tests 26 - "assign and not accum" tests/dynamicemb/test_table_gpu.py &
wait
digest_tests
ab dims_u $(( $(left) / 2 )) 26 3 - uniform 0.5,0.75,1 8,32,64 1,$VAR
ab dims_z $(left) 26 3 - zipf 0.5,0.75,1 8,32,64 1,$VAR
echo "total $(( $(date +%s) - t0 )) s"
