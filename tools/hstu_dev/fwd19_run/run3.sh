#!/bin/bash
# fwd19 (issue 39, session 18), run 3 (<= 30 s), from the root of main's tree (main 6693e9b on the device):
#   OUT=/tmp/o_fwd19 timeout 60 bash .carry/fwd19/run3.sh > /tmp/o_fwd19/stdout.txt 2>&1
# The final commit's wheel: the touched GPU tests that run 2 did not hold (the branch's files in .carry/fwd19/tree):
# test_kernels_gpu.py's sm80-class forward on small batches (split by default: the list's kernel) against the
# reference, both families, target gaps, the GR convention, long contexts; test_sm80_forward_gpu.py's candidates
# (cfg 4's context copy among them) and the kernel each runs.
source "$(dirname "$0")/setup.sh"
echo "== GPU tests ($SECONDS s)"
run_tests 14 "sm80_and_sm90 or both_families or (sm80 and long_contexts)" tests/hstu/test_kernels_gpu.py
run_tests $((28 - SECONDS)) "not split and not (candidates and context and 128)" tests/hstu/test_sm80_forward_gpu.py
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_kernels_gpu.py -k 'sm80_and_sm90 or both_families or (sm80 and long_contexts)';"
echo "#### test_sm80_forward_gpu.py -k 'not split and not (candidates and context and 128)')"
digest_tests
