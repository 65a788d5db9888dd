#!/bin/bash
# fwd28 (issue 39, session 25), run 1 (<= 50 s; wheel of 27311e4: the scaled kernels it names are removed since),
# from the root of main's tree (main 5feb2e0 on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd28/run1.sh > <dir>/stdout.txt 2>&1
# The branch: the bf16 default at D = 256 (the warp pairs, no contexts, no split) where alpha / 2 is a power of two
# scales Q by it in shared memory once per block and issues Q's copy before the mask's setup
# (hstu_fwd_scaled_kernel); cfg5 = fwd_sm80_cfg=5 at D = 256 (LAB): the same with Q's copy behind the setup
# (hstu_fwd_scaled_qlate_kernel); noqs = fwd_sm80_qscale=False: the unscaled pairs (main's default).
# 1. Tests (the branch's files in .carry/fwd28/tree) at D = 256, in this order: the scaled default against the fp32
#    reference and bit for bit against the unscaled kernel (masks, delta-q, seqused, rab; alpha 0.125 / 0.5 / 0.3),
#    the kernel each cfg and the default run, the default at long rows and with contexts / targets, every candidate
#    (cfg 5 too) against the reference and the default on jagged lengths with every mask.
# 2. Time (B16 S4K / B64 S1K / B256 S256 D256, FA2 in the same rounds), three processes: the branch's wheel
#    (default, cfg5, noqs), main28's (its default), the branch's again (noqs first; with and without rab at B256 S256
#    / B64 S1K).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 17 "256 and (not candidates or jagged)" -v $T::test_sm80_forward_qscale \
  $T::test_sm80_forward_candidate_runs_its_kernel $T::test_sm80_forward_default_long_rows_runs_candidate_2 \
  $T::test_sm80_forward_default_contexts_run_candidate_4 $T::test_sm80_forward_candidates
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd28 fwd28 10 --reps 7 --variants default cfg5 noqs --fa2
bench ${BASE_SITE:-/tmp/site_main} main28 6 --reps 7 --variants default --fa2 --cases s4k b256
bench /tmp/site_fwd28 fwd28b $(( $(left) - 1 )) --reps 7 --variants noqs cfg5 default noqs+rab default+rab \
  --cases b256 s1k
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py qscale, runs_its_kernel, long_rows, contexts_run, candidates -k"
echo "#### '256 and (not candidates or jagged)'; -v: PASSED per test)"
digest_verbose
digest_time
