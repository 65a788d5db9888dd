#!/bin/bash
# fwd18 (issue 39, session 17), run 3 (<= 30 s), from the root of main's tree (main d901835 on the device):
#   OUT=/tmp/o_fwd18 timeout 60 bash .carry/fwd18/run3.sh > /tmp/o_fwd18/stdout.txt 2>&1
# The touched GPU tests that run 2 did not finish, on run 2's wheel (the final commit's kernels; the branch's test
# files in .carry/fwd18/tree): test_kernels_gpu.py's sm80-class forward on small batches (the default splits them at
# every D now) against the reference, both families, target gaps, the GR convention, forward + backward with long
# contexts (run 2: 53 passed before its 11 s ran out); test_sm80_forward_gpu.py's other tests (the candidates against
# the reference and the kernel each runs, the long-row rule; its split tests: 22 passed in run 2)
source "$(dirname "$0")/setup.sh"
echo "== GPU tests ($SECONDS s)"
run_tests 17 "sm80_and_sm90 or both_families or (sm80 and long_contexts)" tests/hstu/test_kernels_gpu.py
run_tests $((28 - SECONDS)) "not split" tests/hstu/test_sm80_forward_gpu.py
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_kernels_gpu.py -k 'sm80_and_sm90 or both_families or (sm80 and long_contexts)';"
echo "#### test_sm80_forward_gpu.py -k 'not split')"
digest_tests
