#!/bin/bash
# ctx26 (issue 39, session 23), run 3 (<= 48 s; only if run 2's tests ran out of time), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/ctx26/run3.sh > <dir>/stdout.txt 2>&1
# The same wheel as run 2: test_sm80_forward_gpu.py's tests of the forward's tiles with contexts (the pairs, the
# defaults with contexts, the candidates, the kernel each cfg runs), no timing.
source "$(dirname "$0")/setup.sh"
echo "== GPU tests ($SECONDS s)"
run_tests 42 "context_pairs or default_contexts or candidates or runs_its_kernel" -v tests/hstu/test_sm80_forward_gpu.py
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'context_pairs or default_contexts or candidates or runs_its_kernel')"
grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
