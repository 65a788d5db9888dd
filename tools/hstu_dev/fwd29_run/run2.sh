#!/bin/bash
# fwd29 (issue 39, session 26), run 2 (<= 50 s), from the root of main's tree (main 98f618f on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd29/run2.sh > <dir>/stdout.txt 2>&1
# The branch after run 1: the split's list kernel from one walk (run 1's) and the split kernel with the list's bound
# loaded beside the item and Q's copy issued before the mask's setup (hstu_fwd_split_qearly_kernel);
# kernel_options(fwd_sm80_split_main=True) runs the split as main has it (list walked twice, hstu_fwd_split_kernel).
# 1. Tests (the branch's files in .carry/fwd29/tree), in this order: the split against main's split (bit for bit
#    with exact chunks, past 1,024 tiles, the rule against the fp32 reference), the split with chunks of 1, 2, 3 and
#    the rule (masks, delta-q, seqused, rab), past two waves, the kernels it runs, the list's and workspace's bounds.
# 2. Time: the branch's default against its split main on the Zipf / dense pairs (seed 0: 3,640 tokens; seed 1:
#    9,292) at D = 256 / 64, then main29's wheel (its default) on the same, then the branch's again.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "split" -v $T::test_sm80_forward_split_against_main $T::test_sm80_forward_split \
  $T::test_sm80_forward_split_over_two_waves $T::test_sm80_forward_split_runs_its_kernel \
  $T::test_sm80_forward_split_list_bound $T::test_sm80_forward_split_workspace_bound
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd29 fwd29 8 list --seed1 --reps 7
bench ${BASE_SITE:-/tmp/site_main} main29 6 default --seed1 --reps 7
bench /tmp/site_fwd29 fwd29b $(( $(left) - 1 )) list --seed1 --reps 7
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py split_against_main, split, split_over_two_waves, split_runs_its_kernel,"
echo "#### split_list_bound, split_workspace_bound; -v)"
digest_verbose
digest_time
