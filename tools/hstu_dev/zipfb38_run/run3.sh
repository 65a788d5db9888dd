#!/bin/bash
# zipfb38 (issue 39, session 35), run 3 (the short confirmation call, <= 25 s of work), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/zipfb38/run3.sh
# The final code: the list kernel reading its blocks back from shared memory with a warp's bucket scan, D = 256's
# split on the loop without the split S / dP (bwd_sm80_cfg=13: with it).
# 1. GPU tests: the split at D = 64 / 128 / 256 with contexts + targets (rule and 2-tile chunks), many
#    sequences (a list of hundreds of items), D = 256's two loops.
# 2. The backward on the Zipf pair: main / split at D = 64 / 128 / 256 (3 rounds), then the list kernel's time.
source "$(dirname "$0")/setup.sh"

echo "== 1. GPU tests ($SECONDS s)"
run_tests 10 "many_sequences or ksplit or context_target_group" -v \
  tests/hstu/test_sm80_backward_split_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipfb38 $(left) run3 --reps 3 --prof
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_backward_split_gpu.py)"
digest_tests
echo "#### time (split = fwd_sm80_cfg=14; ms (TFLOP/s at 2.5x fwd FLOPs))"
digest_time | grep -v "prof D.* main:"
