#!/bin/bash
# fwd20 (issue 39, session 19), run 3 (<= 30 s), from the root of main's tree (main 939d473 on the device):
#   OUT=/tmp/o_fwd20 timeout 60 bash .carry/fwd20/run3.sh > /tmp/o_fwd20/stdout.txt 2>&1
# Run 2's wheel (the final code). 1. The tests run 2 did not reach, one pytest: the kernel each cfg runs (3 and 5
# removed), the default's rule, the split's kernels, list bound and rule past two waves, the candidates without
# contexts and under the GR convention. 2. Run 2 measured the Zipf / dense pair 5-7 % slower in the branch's process
# than in main's (main first, then the branch; B16 S4K D128 equal): the branch, main, the branch again, to tell the
# split's new partial layout from the processes' spread.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== GPU tests ($SECONDS s)"
run_tests 12 "not (candidates and context and not gr)" $T::test_sm80_forward_candidate_runs_its_kernel \
  $T::test_sm80_forward_default_long_rows_runs_candidate_2 $T::test_sm80_forward_split_runs_its_kernel \
  $T::test_sm80_forward_split_list_bound $T::test_sm80_forward_split_over_two_waves \
  $T::test_sm80_forward_candidates_gr_convention $T::test_sm80_forward_candidates
echo "== time ($SECONDS s)"
jag /tmp/site_fwd20 fwd20a 5 --reps 5 --dims --zipf 64 256
jag /tmp/site_main main19 5 --reps 5 --dims --zipf 64 256
jag /tmp/site_fwd20 fwd20b $((29 - SECONDS)) --reps 5 --dims --zipf 64 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py: runs_its_kernel, long_rows, split_runs_its_kernel, list_bound, over_two_waves,"
echo "#### candidates_gr_convention, candidates without contexts)"
grep -E "FAILED|ERROR|passed|failed|rror|^tests/" $OUT/tests.log | tail -12 | cut -c1-300
echo "#### time (fwd20a, main19, fwd20b: the Zipf / dense pair, default)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
