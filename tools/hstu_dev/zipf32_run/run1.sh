#!/bin/bash
# zipf32 (issue 39, session 29), run 1 (<= 50 s), from the root of main's tree (main 4d2d71ae on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf32/run1.sh > <dir>/stdout.txt 2>&1
# kernel_options(fwd_sm80_bm64=1 | 2): the sm80-class forward's split at D = 64 / 128 in 64 x 64 tiles of 4 warps x
# 16 rows | 2 warps x 32 rows (FwdSm80SplitBm64<D, n>) instead of 128 x 128 / 128 x 64.
# 1. Tests (the branch's files in .carry/zipf32/tree): the 64-row split against the fp32 reference with every mask,
#    rab, delta-q, seqused, exact chunks, the rule and unsplit; its kernels; the default split's kernels unchanged.
# 2. Time: the branch's default (main's path) against w4 / w2 (bm64=1 / 2) on the Zipf batch and its dense twin
#    at D = 64 / 128 / 256 (256: the default only), then main32's wheel (its default) in its own process.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "bm64 or split_runs_its_kernel" -v $T::test_sm80_forward_split_bm64 \
  $T::test_sm80_forward_split_bm64_runs_its_kernel $T::test_sm80_forward_split_runs_its_kernel
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf32 zipf32 12 ratio --reps 7 --dims 64 128 256
bench ${BASE_SITE:-/tmp/site_main} main32 $(( $(left) - 1 )) ratio --base --reps 7 --dims 64 128
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py split_bm64, split_bm64_runs_its_kernel, split_runs_its_kernel; -v)"
digest_verbose
digest_time
