#!/bin/bash
# claims44 run 5: the portable backward's test files after the test fix (rab-free names)
LIM=${LIM:-300}
source "$(dirname "$0")/setup.sh"
pt=(python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib -rfEs --tb=short -n 4)
(PYTHONPATH=/tmp/site_i39 timeout 200 "${pt[@]}" tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py \
   tests/hstu/test_sm80_backward_split_gpu.py tests/hstu/test_kernel_options.py > $OUT/tests.txt 2>&1; echo "tests rc $? ($SECONDS s)")
tail -1 $OUT/tests.txt; grep -E "^(FAILED|ERROR)" $OUT/tests.txt | head -8 | cut -c1-220
