#!/bin/bash
# fwd29 (issue 39, session 26), run 4 (<= 50 s), from the root of main's tree (main 98f618f on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd29/run4.sh > <dir>/stdout.txt 2>&1
# The branch after run 3 (the final code): whether to split stays main's rule (the least chunk rounded up against
# the longest walk); only as the device's floor is it rounded down (run 3's wheel rounded it down for both, which
# would have split B4 S4K ctx3 at D = 256: least 63 of 64 KV tiles). kernel_options(fwd_sm80_split_main=True):
# main's split.
# 1. Tests (the branch's files in .carry/fwd29/tree): the split against main's, the split with chunks of 1, 2, 3 and
#    the rule, past two waves, its kernels, the list's and workspace's bounds.
# 2. Time (the branch's wheel, default against split main): the Zipf / dense pairs (seeds 0 and 1) at D = 256 /
#    128 / 64; dense batches near the split's bound (B4 S4K ctx3, B2 S4K, B8 S1K); each kernel of the seed-0 pair.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 13 "split" -v $T::test_sm80_forward_split_against_main $T::test_sm80_forward_split \
  $T::test_sm80_forward_split_over_two_waves $T::test_sm80_forward_split_runs_its_kernel \
  $T::test_sm80_forward_split_list_bound $T::test_sm80_forward_split_workspace_bound
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd29 fwd29 9 list --seed1 --reps 7 --dims 256 128 64
bench /tmp/site_fwd29 fwd29e 9 edge --reps 5 --dims 256 128 64
bench /tmp/site_fwd29 fwd29p $(( $(left) - 1 )) prof --dims 256 64
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py split_against_main, split, split_over_two_waves, split_runs_its_kernel,"
echo "#### split_list_bound, split_workspace_bound; -v)"
digest_verbose
digest_time
