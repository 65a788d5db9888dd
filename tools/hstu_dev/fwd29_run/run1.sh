#!/bin/bash
# fwd29 (issue 39, session 26), run 1 (<= 50 s), from the root of main's tree (main 98f618f on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd29/run1.sh > <dir>/stdout.txt 2>&1
# The branch: the split's list kernel keeps its first walk's query tiles (up to 1,024) in shared memory and places
# the work items from them, a thread per tile, instead of walking the sequences a second time (seq_info and the
# mask's key tiles again, a warp per sequence); kernel_options(fwd_sm80_list_cache=False) walks twice (main's).
# 1. Tests (the branch's files in .carry/fwd29/tree), in this order: the list from shared memory and walked twice,
#    bit for bit with exact chunks, past 1,024 tiles, against the fp32 reference with the rule; the split with
#    chunks of 1, 2, 3 and the rule (masks, delta-q, seqused, rab); the kernels the split runs, the list's bound.
# 2. Time: main29's wheel on the Zipf / dense pair (3 contexts) at D = 256 / 64 with exact chunks around the rule's
#    (where the chunk rule loses); the branch's: the default against the list walked twice, the Zipf batch's long
#    and short sequences apart; each kernel (torch.profiler) of both variants.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 17 "split" -v $T::test_sm80_forward_split_list_cache $T::test_sm80_forward_split \
  $T::test_sm80_forward_split_runs_its_kernel $T::test_sm80_forward_split_list_bound
echo "== 2. time ($SECONDS s)"
bench ${BASE_SITE:-/tmp/site_main} main29 9 sweep --reps 5
bench /tmp/site_fwd29 fwd29 8 list parts --reps 7
bench /tmp/site_fwd29 fwd29p $(( $(left) - 1 )) prof
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py split_list_cache, split, split_runs_its_kernel, split_list_bound; -v)"
digest_verbose
digest_time
