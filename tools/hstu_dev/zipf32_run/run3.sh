#!/bin/bash
# zipf32 (issue 39, session 29), run 3 (<= 50 s), from the root of main's tree (main 4d2d71ae on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf32/run3.sh > <dir>/stdout.txt 2>&1
# The final code: the default splits in 64 x 64 tiles (D = 64: 2 warps x 32 rows; D = 128: 4 warps x 16 rows) only
# where the 128-row plan's least chunk covers at most 640 keys (run 2: the 64-row tiles 0.92-0.96x on the small
# batches, 1.01-1.14x from ~8K tokens of long sequences); D = 128's 2-warp tile removed (fwd_sm80_bm64=2 runs 1).
# 1. Tests (the branch's files in .carry/zipf32/tree): every split test of test_sm80_forward_gpu.py (the 64-row
#    tiles n = 1 / 2 with every mask, the rule's choices, the 128-row split's) and the sm80-class forward against the
#    reference at D = 32-256 (test_kernels_gpu.py).
# 2. Time: default (the rule) / b128 (fwd_sm80_bm64=3, main's path) / w4 / w2 on run 2's cases at D = 64 / 128;
#    then main32's wheel in its own process.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 26 "split or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf32 zipf32 10 ratio --b128 --seed1 --edge --reps 5 --dims 64 128
bench ${BASE_SITE:-/tmp/site_main} main32 $(( $(left) - 1 )) ratio --base --seed1 --edge --reps 5 --dims 64 128
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
