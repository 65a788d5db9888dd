#!/bin/bash
# zipf37 (issue 39, session 34), run 1 (<= 50 s), from the root of main's tree (main37 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf37/run1.sh > <dir>/stdout.txt 2>&1
# The split's short work items (at most chunk / 2 KV tiles) two to a block, each one's Q / K / V copies issued under
# the end of the one before (hstu_fwd_split_group_kernel); fwd_sm80_cfg=12 three to a block; fwd_sm80_cfg=11 one
# item per block (main's split kernel).
# 1. Tests (the branch's files in .carry/zipf37/tree): every split test of test_sm80_forward_gpu.py (groups: 2 / 3 to
#    a block bit for bit one per block, vs unsplit and the fp32 reference, many empty / 1-token / short sequences,
#    contexts, targets, windows; sync: the default in a CUDA graph bit for bit the plain path) and the sm80-class
#    forward against the reference (test_kernels_gpu.py).
# 2. Time: g2 / g3 / main on the Zipf batch and its dense twin at D = 64 / 128 / 256; the backward's Zipf / dense.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 26 "split or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf37 zipf37 $(( $(left) + 4 )) ratio bwd --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
