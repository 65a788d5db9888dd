#!/bin/bash
# fwd27 (issue 39, session 24), run 2 (<= 50 s), from the root of main's tree (main 78423b0 on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd27/run2.sh > <dir>/stdout.txt 2>&1
# The branch after run 1 (the SiLU forms measured slower and removed): the bf16 default at D = 64 (long rows, no
# contexts, no split) where alpha / 2 is a power of two scales the warps' Q fragments by it once per block
# (hstu_fwd_qreg_scaled_kernel): no FMUL per score; kernel_options(fwd_sm80_qscale=False) the unscaled kernel
# (main's default, candidate 3).
# 1. Tests (the branch's files in .carry/fwd27/tree): the scaled default against the fp32 reference and bit for bit
#    against the unscaled kernel (masks, delta-q, seqused, rab; alpha 0.125 / 0.5 / 0.3), the defaults' kernels and
#    outputs at long rows, the kernel each cfg runs, the candidates and the split at D = 64.
# 2. Time (B16 S8K / S4K / B128 S1K D64, FA2 in the same rounds), three processes: the branch's wheel (the default,
#    noqs = fwd_sm80_qscale=False), main27's (its default), the branch's again (noqs first).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "qscale or default_long_rows or runs_its_kernel or (candidates and 64 and not gr) or (split and 64)" -v \
  $T::test_sm80_forward_qscale $T::test_sm80_forward_default_long_rows_runs_candidate_2 \
  $T::test_sm80_forward_candidate_runs_its_kernel $T::test_sm80_forward_candidates $T::test_sm80_forward_split
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd27 fwd27 8 --reps 7 --variants default noqs --fa2
bench ${BASE_SITE:-/tmp/site_main} main27 7 --reps 7 --variants default --fa2
bench /tmp/site_fwd27 fwd27b $(( $(left) - 1 )) --reps 7 --variants noqs default --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py qscale, default_long_rows, runs_its_kernel, candidates -k 64, split -k 64;"
echo "#### -v: PASSED per test)"
digest_verbose
echo "#### (noqs = kernel_options(fwd_sm80_qscale=False): the unscaled kernel, main's default; x / default > 1: slower)"
digest_time
