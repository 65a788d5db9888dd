#!/bin/bash
# zipf37 (issue 39, session 34), run 2 (<= 50 s), from the root of main's tree (main37 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf37/run2.sh > <dir>/stdout.txt 2>&1
# The wheel with fwd_sm80_cfg=12 = the short-item pairs placed in the list by their weight (the list kernel's PLACE
# and its blocks' table); the default (g2: pairs at the list's tail) and fwd_sm80_cfg=11 (main's split kernel) as in
# run 1.
# 1. Tests: every split test of test_sm80_forward_gpu.py (groups: g2 and place bit for bit one item per block, vs
#    unsplit and the fp32 reference; run 1's D = 128 name check and list_bound's expectation fixed) and the sm80-class
#    forward against the reference (test_kernels_gpu.py).
# 2. Time: g2 / place / main on the Zipf pair, the seed-1 pair, B4 S4K, B2 S4K, B8 S1K at D = 64 / 128 / 256, then
#    the Zipf pair's call timeline per variant.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 22 "split or sm80_and_sm90" -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf37 zipf37 $(( $(left) + 4 )) ratio gaps --reps 5 --dims 64 128 256 --edge
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference)"
digest_verbose
digest_time
