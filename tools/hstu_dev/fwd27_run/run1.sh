#!/bin/bash
# fwd27 (issue 39, session 24), run 1 (<= 50 s), from the root of main's tree (main 78423b0 on the device):
#   OUT=<dir> timeout 56 bash .carry/fwd27/run1.sh > <dir>/stdout.txt 2>&1
# The branch: kernel_options(fwd_sm80_silu=1 / 2 / 3) on the bf16 D = 64 long-row tile (candidate 3, Q in
# registers; hstu_fwd_qreg_silu_kernel): half / all of each thread's P words by the FP8 forward's degree-5 polynomial
# in half2 arithmetic instead of tanh.approx (MUFU), 3 no MUFU op at all (timing only: the MUFU's ceiling). The
# default is unchanged (its kernels' code as main's).
# 1. Tests (the branch's files in .carry/fwd27/tree): the SiLU forms against the fp32 reference and the default, the
#    default's kernels at long rows and per cfg (the cfg word now carries the form in bits 3-4).
# 2. Time: main27's wheel (the default, FA2), then the branch's: B16 S8K / S4K / B128 S1K D64, silu 0-3, FA2 (run 1
#    ran 8f7cfbe's fwd27_bench.py, --silus 0 [1 2 3]: the same calls as --variants default [silu1 silu2 silu3] now).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 16 "silu_forms or default_long_rows or runs_its_kernel" -v $T::test_sm80_forward_silu_forms \
  $T::test_sm80_forward_default_long_rows_runs_candidate_2 $T::test_sm80_forward_candidate_runs_its_kernel
echo "== 2. time ($SECONDS s)"
bench ${BASE_SITE:-/tmp/site_main} main27 8 --reps 5 --variants default --fa2
bench /tmp/site_fwd27 fwd27 $(( $(left) - 1 )) --reps 5 --variants default silu1 silu2 silu3 --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'silu_forms or default_long_rows or runs_its_kernel'; -v: PASSED per test)"
digest_verbose
digest_time
