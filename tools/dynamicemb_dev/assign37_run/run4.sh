#!/bin/bash
# assign37 run 4 (confirmation, the final wheel of run 3): the GPU tests that reach LRU assign's kernel, to the end,
# in three processes side by side on the default path: test_table_gpu.py's CPU-twin comparison of every op (assign
# included), the row-writer duplicates with assign, the full-table first-pass families / contention / graph capture,
# and test_table_assign_gpu.py's contract test (run 3 cut its summary line).
. .carry/assign37/common.sh
. $C/setup.sh
B=54
LOG=tests_a run_tests 46 - "matches_cpu_twin" tests/dynamicemb/test_table_gpu.py &
LOG=tests_b run_tests 46 - "row_writer and assign and not insert_or_assign" tests/dynamicemb/test_table_gpu.py &
LOG=tests_c run_tests 46 - "first_pass_families or contention or graph or duplicates_missing" \
  tests/dynamicemb/test_table_gpu.py tests/dynamicemb/test_table_assign_gpu.py &
wait
digest_tests
echo "total $(( $(date +%s) - t0 )) s"
