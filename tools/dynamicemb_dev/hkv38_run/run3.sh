#!/bin/bash
# hkv38 run 3 (the short confirmation): this branch's wheel (assign_lru_kernel without its lab what-ifs; SASS of
# every product kernel identical to main38's, tools/sass_diff.py --renames: 495 identical, the 6 assign kernels
# renamed) under test_table_assign_gpu.py (duplicates, missing keys, scores per policy on the default and the
# copiers' paths; the kernel's table = the copiers').
B=25
SITES=self
. .carry/hkv38/common.sh
. $C/setup.sh
run_tests $(( $(left) - 1 )) - "" tests/dynamicemb/test_table_assign_gpu.py
digest_tests
grep -E "\[ *[0-9]+%\]" $OUT/tests.log | tail -1 | cut -c1-120
echo "total $(elapsed) s"
