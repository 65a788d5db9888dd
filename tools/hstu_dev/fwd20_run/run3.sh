#!/bin/bash
# fwd20 (issue 39, session 19), run 3 (<= 30 s), from the root of main's tree (main 939d473 on the device):
#   OUT=/tmp/o_fwd20 timeout 60 bash .carry/fwd20/run3.sh > /tmp/o_fwd20/stdout.txt 2>&1
# The final wheel (run 2's code): the tests run 2 did not reach, one pytest -v: the kernel each cfg runs (3 and 5
# removed), the default's rule, the split's kernels, list bound and rule past two waves, the candidates without
# contexts and under the GR convention, test_kernels_gpu.py's both-families target gap.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== GPU tests ($SECONDS s)"
run_tests 26 "not (candidates and context and not gr)" -v $T::test_sm80_forward_candidate_runs_its_kernel \
  $T::test_sm80_forward_default_long_rows_runs_candidate_2 $T::test_sm80_forward_split_runs_its_kernel \
  $T::test_sm80_forward_split_list_bound $T::test_sm80_forward_split_over_two_waves \
  $T::test_sm80_forward_candidates_gr_convention $T::test_sm80_forward_candidates \
  tests/hstu/test_kernels_gpu.py::test_target_gap_both_families
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
grep -cE "PASSED" $OUT/tests.log | sed 's/^/passed: /'
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8 | cut -c1-300
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[.*/\1/; s/.*::(test_[a-z0-9_]+) PASSED.*/\1/' | sort | uniq -c
