#!/bin/bash
# bwd22 (issue 39, session 21), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_bwd22 timeout 60 bash .carry/bwd22/run3.sh > /tmp/o_bwd22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd22_run/pack.sh /work/main/.carry/bwd22)
# The wheel of run 2 (the final code): the backward part of test_kernels_gpu.py that runs the sm80-class kernels
# (the sm80 tests, both families against the reference, the deterministic backward, rab without drab).
LIM=29
source "$(dirname "$0")/setup.sh"
echo "== GPU tests ($SECONDS s)"
gpu_tests 26 $TK -k "sm80 or both_families or deterministic_backward or rab_without_drab"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | cut -c1-160 | tail -12
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//; s/.*:://' | sort | uniq -c
