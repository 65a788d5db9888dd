#!/bin/bash
# zipf37 (issue 39, session 34), run 3 (<= 50 s), from the root of main's tree (main37 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf37/run3.sh > <dir>/stdout.txt 2>&1
# The same wheel as run 2 (the kernel code final). Run 2 measured D = 64 (g2 / place / main, with the seed-1 pair, B4
# S4K, B2 S4K, B8 S1K: the runs of items slower everywhere) and its tests reached bm64 (67 passed, time out); its
# bench stopped on a bug of the script (fixed).
# 1. Tests not reached in run 2: list_bound, workspace_bound, bm64_rule, the kernel-name tests, the sm80-class
#    forward against the reference (test_kernels_gpu.py).
# 2. Time: g2 / place / main at D = 128 / 256 on the same cases; the backward's kernels on the Zipf pair (bprof);
#    then, if time is left, the Zipf pair's call timeline per variant at D = 64 (gaps: V / L / S).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 16 "list_bound or workspace_bound or bm64_rule or runs_its_kernel or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf37 zipf37 $(( $(left) + 4 )) ratio bprof --reps 5 --dims 128 256 --edge
bench /tmp/site_zipf37 zipf37 $(( $(left) + 4 )) gaps --dims 64
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k list_bound, workspace_bound, bm64_rule, runs_its_kernel;"
echo "#### test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
