#!/bin/bash
# zipfb38 (issue 39, session 35), run 2 (<= 53 s), from the root of main's tree (main38 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipfb38/run2.sh
# 1. GPU tests: the split with many sequences (a list of hundreds of items), D = 256's split on the loop without the
#    split S / dP (bwd_sm80_cfg=13) (run 1: the other 33 passed).
# 2. The backward: main / split / split13 (D = 256, bwd_sm80_cfg=13) on the Zipf pair and the edge batches (seed-1
#    Zipf, B16 S4K without contexts, B8 S1K) in one process, then each kernel's time per call (list / backward / dQ).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "many_sequences or unsplit" -v tests/hstu/test_sm80_backward_split_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_zipfb38 $(left) run2 --edge --cfg13 --prof --reps 5
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_backward_split_gpu.py)"
digest_tests
echo "(PASSED lines: $(grep -c PASSED $OUT/tests.log), FAILED: $(grep -c FAILED $OUT/tests.log))"
echo "#### time (split = fwd_sm80_cfg=14; split13 / main13 + bwd_sm80_cfg=13 at D = 256; ms (TFLOP/s at 2.5x fwd FLOPs))"
digest_time
