#!/bin/bash
# fwd19 (issue 39, session 18), run 3 (<= 30 s), from the root of main's tree (main 6693e9b on the device):
#   OUT=/tmp/o_fwd19 timeout 60 bash .carry/fwd19/run3.sh > /tmp/o_fwd19/stdout.txt 2>&1
# The final commit's wheel (the branch's test files in .carry/fwd19/tree): the split's rule past two waves and D = 64's
# context default (run 2's "wave" and cfg 4, now the defaults), then the touched tests run 2 did not hold:
# test_sm80_forward_gpu.py: the split over two waves against the reference, D = 64's context default (its kernel,
# bitwise candidate 4, the reference), the kernels that run, the list's bound, candidate 4 with contexts at D = 64;
# test_kernels_gpu.py: the sm80-class forward on small batches (the default's split) against the reference, both
# families. Then the new defaults' times (fwd19_jag.py, the branch only: main's are run 2's).
source "$(dirname "$0")/setup.sh"
echo "== GPU tests ($SECONDS s)"
run_tests 7 "over_two_waves or contexts_d64 or runs_its_kernel or list_bound" tests/hstu/test_sm80_forward_gpu.py
run_tests 5 "candidates and context and 64 and not gr and not 256" tests/hstu/test_sm80_forward_gpu.py
run_tests 9 "sm80_and_sm90 or both_families" tests/hstu/test_kernels_gpu.py
echo "== time ($SECONDS s)"
jag /tmp/site_fwd19 fwd19 $((29 - SECONDS)) --cfgs 0 --reps 5 --dims 256 --seeds 1 --no-base --masks
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'over_two_waves or contexts_d64 or runs_its_kernel or list_bound', -k"
echo "#### 'candidates and context and 64 and not gr and not 256'; test_kernels_gpu.py -k 'sm80_and_sm90 or both_families')"
digest_tests
echo "#### time (fwd19 = the final wheel, cfg 0 the default)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
