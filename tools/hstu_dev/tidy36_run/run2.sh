#!/bin/bash
# tidy36 (session 33), run 2 (<= 50 s; the branch's wheel of c6812aec beside main36's), from the root of main's tree:
#   OUT=/tmp/out_tidy36 timeout 56 bash .carry/tidy36/run2.sh
# The branch as run 1's plus the Hopper forwards' (bf16, FP8) epilogue store as one function (fwd_store_o_rows).
# In parallel:
# 1. GPU tests (the branch's test files): test_fp8.py -k "fwd and not copy_and_tile_cuts" (38: the FP8 forward's
#    main-loop, diag, trace, refusal and Vt pre-pass tests), test_kernels_gpu.py -k "persistent_forward or
#    jagged_work_list_forward or every_head_dim or sm80_and_sm90_kernels_agree" (34: the Hopper forward's orders),
#    test_fp8.py -k "copy_and_tile_cuts and causal" (5).
# 2. bitcmp.py: the touched kernels' outputs under main's wheel and the branch's, bit for bit.
source "$(dirname "$0")/setup.sh"
tst fp8fwd 44 "fwd and not copy_and_tile_cuts" tests/hstu/test_fp8.py
tst sm90fwd 44 "persistent_forward or jagged_work_list_forward or every_head_dim or sm80_and_sm90_kernels_agree" \
    tests/hstu/test_kernels_gpu.py
tst fp8cuts 44 "copy_and_tile_cuts and causal" tests/hstu/test_fp8.py
bits 20
wait
echo
echo "################ DIGEST tidy36 run2 ($GPU; done at $SECONDS s)"
digest_all
