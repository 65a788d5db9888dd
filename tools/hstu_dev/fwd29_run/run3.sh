#!/bin/bash
# fwd29 (issue 39, session 26), run 3 (<= 50 s), from the root of main's tree (main 98f618f on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd29/run3.sh > <dir>/stdout.txt 2>&1
# The branch after run 1 (the final code): the split's least chunk rounded down (run 1: above the real mean work per
# block slot it set the Zipf batch's chunk at D = 64 to 5 KV tiles, where 4 ran 4 % faster), the list kernel from
# one walk (no cost per query tile in its rule: larger chunks measured slower), the split kernel with the list's
# bound beside the item and Q's copy early (run 2's); kernel_options(fwd_sm80_split_main=True): main's split.
# 1. Tests (the branch's files in .carry/fwd29/tree), in this order: the split against main's, the split with chunks
#    of 1, 2, 3 and the rule, past two waves, its kernels, the list's and workspace's bounds; the sm80-class forward
#    against the reference at D = 32-256 (test_kernels_gpu.py).
# 2. Time: the branch's default against its split main on the Zipf / dense pairs (seeds 0 and 1) at D = 256 / 128 /
#    64, then main29's wheel (its default), then the branch's again.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 18 "split or sm80_and_sm90" -v $T::test_sm80_forward_split_against_main $T::test_sm80_forward_split \
  $T::test_sm80_forward_split_over_two_waves $T::test_sm80_forward_split_runs_its_kernel \
  $T::test_sm80_forward_split_list_bound $T::test_sm80_forward_split_workspace_bound \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd29 fwd29 8 list --seed1 --reps 7 --dims 256 128 64
bench ${BASE_SITE:-/tmp/site_main} main29 7 default --seed1 --reps 7 --dims 256 128 64
bench /tmp/site_fwd29 fwd29b $(( $(left) - 1 )) list --seed1 --reps 7 --dims 256 128 64
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py split_against_main, split, split_over_two_waves, split_runs_its_kernel,"
echo "#### split_list_bound, split_workspace_bound; test_kernels_gpu.py sm80_and_sm90_kernels_agree_with_reference; -v)"
digest_verbose
digest_time
