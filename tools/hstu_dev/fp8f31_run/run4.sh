#!/bin/bash
# fp8f31 run 4 (only if offered; issue 36, session 28; <= 50 s): the flipped wheel's whole GPU part of test_fp8.py
# (every FP8 forward / quantize / dequantize GPU test, one pytest process; ~17 s alone on an H200 in session 27).
# `OUT=DIR timeout 56 bash .carry/fp8f31/run4.sh` from the root of main's tree (carry: fp8f31_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 45 "cuda" tests/hstu/test_fp8.py
echo "#### digest: $GPU"
digest_tests
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -4  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f31 run 4 done at $SECONDS s"
