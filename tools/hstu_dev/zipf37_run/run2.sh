#!/bin/bash
# zipf37 (issue 39, session 34), run 2 (<= 50 s), from the root of main's tree (main37 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf37/run2.sh > <dir>/stdout.txt 2>&1
# The wheel with fwd_sm80_cfg=12 = the short-item pairs placed in the list by their weight (the list kernel's PLACE
# and its blocks' table); the default (g2: pairs at the list's tail) and fwd_sm80_cfg=11 (main's split kernel) as in
# run 1.
# 1. Tests: the split's groups / sync / list-bound / kernel-name tests (groups: g2 and place bit for bit one item
#    per block, vs unsplit and the fp32 reference).
# 2. Time: g2 / place / main on the Zipf pair at D = 64 / 128 / 256, then the call's timeline at D = 64 / 128.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 18 "groups or split_sync or list_bound or runs_its_kernel or against_main or bm64_rule" -v $T
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipf37 zipf37 $(( $(left) + 4 )) ratio gaps --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k groups, split_sync, list_bound, runs_its_kernel, against_main, bm64_rule)"
digest_verbose
digest_time
