#!/bin/bash
# fwd21 (issue 39, session 20), run 3 (<= 30 s), from the root of main's tree (main 4f9dd10 on the device):
#   OUT=/tmp/o_fwd21 timeout 60 bash .carry/fwd21/run3.sh > /tmp/o_fwd21/stdout.txt 2>&1
# The wheel of run 2 (the final kernels). Tests (the branch's files in .carry/fwd21/tree; one pytest, -v): the
# candidates at D = 64 / 128 / 256 with every mask (every cfg against the fp32 reference and the default; the GR
# convention), the rest of test_sm80_forward_gpu.py that run 2 did not hold: with run 2, the whole file on this wheel.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
run_tests 27 "candidates" -v -v $T
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k candidates; -v)"
digest_verbose
