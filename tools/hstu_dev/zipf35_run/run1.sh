#!/bin/bash
# zipf35 (issue 39, session 32), run 1 (<= 50 s), from the root of main's tree (main35 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf35/run1.sh > <dir>/stdout.txt 2>&1
# The split without its list kernel on small batches (<= 32 sequences, the rule's chunks): each block of
# hstu_fwd_split_self_kernel derives its own item behind the validation (which zeroes the tiles' counters);
# kernel_options(fwd_sm80_split_main=True) = main's path (the list kernel, then the split kernel).
# 1. Tests (the branch's files in .carry/zipf35/tree): every split test of test_sm80_forward_gpu.py (against_main:
#    the self items bit for bit the list's on 8- and 32-sequence batches; sync: the self items against main33's
#    plain path, eager and in a CUDA graph) and the sm80-class forward against the reference (test_kernels_gpu.py).
# 2. Time: default / main on the Zipf batch and its dense twin at D = 64 / 128 / 256, then each call's timeline.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 24 "split or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf35 zipf35 $(( $(left) + 3 )) ratio gaps --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
