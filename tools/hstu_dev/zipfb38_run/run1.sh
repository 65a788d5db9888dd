#!/bin/bash
# zipfb38 (issue 39, session 35), run 1 (<= 53 s), from the root of main's tree (main38 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipfb38/run1.sh
# 1. GPU tests of the split (tests/hstu/test_sm80_backward_split_gpu.py: error rule, poisoned gradients, long + short
#    sequences, causal / contexts / targets / local / none, rule and 2-tile chunks, second run bitwise, vs main).
# 2. The backward on the Zipf pair (B32 max 4K / B2 S1820, bf16 H4 causal ctx3): main / split / split6 / split12 in one
#    process at D = 64 / 128 / 256, dK / dV against main first (--check).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 22 "split" -v tests/hstu/test_sm80_backward_split_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipfb38 $(left) run1 --check --chunks 6 12 --reps 5
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_backward_split_gpu.py)"
digest_tests
echo "(PASSED lines: $(grep -c PASSED $OUT/tests.log), FAILED: $(grep -c FAILED $OUT/tests.log))"
echo "#### time (split = fwd_sm80_cfg=14, splitN = + fwd_split_tiles=N; ms (TFLOP/s at 2.5x fwd FLOPs))"
digest_time
