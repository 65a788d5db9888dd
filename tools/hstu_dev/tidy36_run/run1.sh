#!/bin/bash
# tidy36 (session 33), run 1 (<= 50 s; the branch's wheel beside main36's), from the root of main's tree:
#   OUT=/tmp/out_tidy36 timeout 56 bash .carry/tidy36/run1.sh
# The branch (no behaviour change intended): main's sm80 rab path as kernel_options(fwd_sm80_cfg=8) (was
# fp8_fwd_var=10), unpack_lo / unpack_hi in hstu_common.cuh for the sm80 forward's rab tiles and the Hopper kernels,
# the FP8 Vt pre-passes' output step as one function. In parallel:
# 1. GPU tests (the branch's test files): test_sm80_forward_gpu.py -k "rab_smem or qscale" (24),
#    test_fp8.py -k "vt_prepass or copy_and_tile_cuts" (30), test_kernel_options.py (9), test_kernels_gpu.py -k
#    "sm90_backward_with_rab or rab_without_drab or sm80_and_sm90_kernels_agree" (22: the Hopper kernels with rab).
# 2. bitcmp.py: the touched kernels' outputs under main's wheel and the branch's, bit for bit.
source "$(dirname "$0")/setup.sh"
tst sm80rab 44 "rab_smem or qscale" tests/hstu/test_sm80_forward_gpu.py
tst fp8vt 44 "vt_prepass or copy_and_tile_cuts" tests/hstu/test_fp8.py
tst opts 30 "" tests/hstu/test_kernel_options.py
tst sm90rab 44 "sm90_backward_with_rab or rab_without_drab or sm80_and_sm90_kernels_agree" tests/hstu/test_kernels_gpu.py
bits 20
wait
echo
echo "################ DIGEST tidy36 run1 ($GPU; done at $SECONDS s)"
digest_all
