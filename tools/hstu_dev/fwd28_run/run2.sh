#!/bin/bash
# fwd28 (issue 39, session 25), run 2 (<= 50 s), from the root of main's tree (main 5feb2e0 on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd28/run2.sh > <dir>/stdout.txt 2>&1
# The branch after run 1 (Q scaled by alpha / 2 at D = 256 measured 1-2 % slower: removed): the bf16 default at
# D = 256 (the warp pairs, no contexts, no split) issues Q's copy before the mask's setup (hstu_fwd_qearly_kernel)
# where a sequence has at most 4 query tiles (max_seqlen_q <= 256), else candidate 3 (main's pairs) as before;
# cfg3 = fwd_sm80_cfg=3: main's pairs (Q's copy late) at every row count; cfg5 = fwd_sm80_cfg=5 at D = 256 (LAB):
# the Q-early pairs at every row count.
# 1. Tests (the branch's files in .carry/fwd28/tree), in this order: the Q-early default at short rows against the
#    fp32 reference and bit for bit against candidate 3 (masks, delta-q, seqused, rab, empty walks), the kernel each
#    cfg and the default run (D 32-256), the default at long rows, with contexts / targets at D = 256, every candidate
#    at D = 256 on dense lengths with every mask, the D = 64 scaled-Q default (the launcher's rule in a helper now).
# 2. Time (B16 S4K / B64 S1K / B256 S256 / B128 S512 D256, FA2 in the same rounds): the branch's wheel (default,
#    cfg3, cfg5), main28's (its default), the branch's again (cfg3 first).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 19 "not candidates or (256 and dense)" -v $T::test_sm80_forward_short_rows_q_early \
  $T::test_sm80_forward_candidate_runs_its_kernel $T::test_sm80_forward_default_long_rows_runs_candidate_2 \
  "$T::test_sm80_forward_default_contexts_run_candidate_4[256-context-0]" \
  "$T::test_sm80_forward_default_contexts_run_candidate_4[256-target_group-0]" \
  $T::test_sm80_forward_candidates $T::test_sm80_forward_qscale
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd28 fwd28 10 --reps 9 --variants default cfg3 cfg5 --fa2 --cases b256 s512 s1k s4k
bench ${BASE_SITE:-/tmp/site_main} main28 6 --reps 9 --variants default --fa2 --cases b256 s4k
bench /tmp/site_fwd28 fwd28b $(( $(left) - 1 )) --reps 9 --variants cfg3 default cfg5 --fa2 --cases b256 s4k
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py short_rows_q_early, runs_its_kernel, long_rows, contexts_run[256-context /"
echo "#### target_group], candidates -k '256 and dense', qscale (D = 64); -v: PASSED per test)"
digest_verbose
digest_time
