#!/bin/bash
# zipf32 (issue 39, session 29), run 2 (<= 50 s), from the root of main's tree (main 4d2d71ae on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf32/run2.sh > <dir>/stdout.txt 2>&1
# The branch's default after run 1: the sm80-class forward's split at D = 64 in 64 x 64 tiles of 2 warps x 32 rows
# (fwd_sm80_bm64=2), at D = 128 of 4 warps x 16 rows (=1), wherever the split runs (fwd_sm80_bm64=3: the 128-row
# tiles, main's path).
# 1. Tests (the branch's files in .carry/zipf32/tree): the rule's kernels; the split's tests (now mostly on the rule's
#    tiles) with every mask against the fp32 reference; past two waves; the 128-row split's kernels and workspace
#    bound; the sm80-class forward against the reference at D = 32-256 (test_kernels_gpu.py).
# 2. Time: default (the rule) / b128 (main's path) / w4 / w2 on the Zipf pairs (seeds 0, 1) and dense B4 S4K, B2 S4K,
#    B8 S1K at D = 64 / 128; then main32's wheel in its own process with the time left.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "split or sm80_and_sm90" -v $T::test_sm80_forward_split_bm64_rule $T::test_sm80_forward_split \
  $T::test_sm80_forward_split_against_main $T::test_sm80_forward_split_over_two_waves \
  $T::test_sm80_forward_split_runs_its_kernel $T::test_sm80_forward_split_workspace_bound \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf32 zipf32 18 ratio --b128 --seed1 --edge --reps 5 --dims 64 128
bench ${BASE_SITE:-/tmp/site_main} main32 $(( $(left) - 1 )) ratio --base --seed1 --reps 5 --dims 64 128
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py split_bm64_rule, split, split_against_main, split_over_two_waves,"
echo "#### split_runs_its_kernel, split_workspace_bound; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_ref.)"
digest_verbose
digest_time
