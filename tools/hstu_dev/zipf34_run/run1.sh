#!/bin/bash
# zipf34 (issue 39, session 31), run 1 (<= 50 s), from the root of main's tree (main 39ee30ed on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf34/run1.sh > <dir>/stdout.txt 2>&1
# The split's list kernel cut (hstu_sm80_fwd_list_kernel<.., false>): the work summed per warp (one 32-bit shared
# atomic per warp instead of a 64-bit one, a compare-and-swap loop), the chunk divisions by a 2^40 reciprocal, a
# walk's whole chunks placed as one range; kernel_options(fwd_sm80_split_plain=True) runs main's list kernel (with
# main33's plain launches and fences).
# 1. Tests (the branch's files in .carry/zipf34/tree): every split test of test_sm80_forward_gpu.py (the sync test
#    now the lean list against main's bit for bit, eager and in a CUDA graph; against_main: 1,101 tiles, the walk
#    again) and the sm80-class forward against the reference at D = 32-256 (test_kernels_gpu.py).
# 2. Time: default / plain on the Zipf batch and its dense twin at D = 64 / 128 / 256 and the timeline per call
#    (gaps: the list kernel's us, L, both variants in one process).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 23 "split or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf34 zipf34 $(( $(left) + 2 )) ratio gaps --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
