#!/bin/bash
# tidy36 (session 33), run 2 (<= 50 s; the branch's final wheel (code of 2168ce9a, run 1's wheel) beside main36's),
# from the root of main's tree:
#   OUT=/tmp/out_tidy36 timeout 56 bash .carry/tidy36/run2.sh
# The branch (no behaviour change intended; SASS of every kernel main36's, tools/sass_diff.py): main's sm80 rab path
# as kernel_options(fwd_sm80_cfg=8) (was fp8_fwd_var=10), unpack_lo / unpack_hi in hstu_common.cuh, the FP8 Vt
# pre-passes' output step as one function. In parallel:
# 1. GPU tests (the branch's test files): test_fp8.py -k "fwd and not copy_and_tile_cuts" (38: the FP8 forward's
#    main-loop, diag, trace, refusal and Vt pre-pass tests; run 1 had the Vt pre-pass and copy / tile-cut tests),
#    test_kernels_gpu.py -k "persistent_forward or jagged_work_list_forward or every_head_dim or
#    sm80_and_sm90_kernels_agree" (34).
# 2. ratio.py under the branch's wheel, then main's: the portable forward B16 S4K H4 causal, rab by default and by
#    main's rab path (fwd_sm80_cfg=8 / main's fp8_fwd_var=10) in one process each: the same ratios.
source "$(dirname "$0")/setup.sh"
tst fp8fwd 44 "fwd and not copy_and_tile_cuts" tests/hstu/test_fp8.py
tst sm90fwd 44 "persistent_forward or jagged_work_list_forward or every_head_dim or sm80_and_sm90_kernels_agree" \
    tests/hstu/test_kernels_gpu.py
(PYTHONPATH=/tmp/site_$NAME timeout 20 python3 -P $C/ratio.py branch --rounds 5
 PYTHONPATH=/tmp/site_main timeout 18 python3 -P $C/ratio.py main36 --rounds 5) > $OUT/ratio.log 2>&1 &
wait
echo
echo "################ DIGEST tidy36 run2 ($GPU; done at $SECONDS s)"
digest_all 2>/dev/null | grep -v "^## bitcmp"
echo "## ratio (ms, median of 5 rounds of 10 calls, variants interleaved; other processes on the GPU meanwhile)"
grep -E "D[0-9]+:|rror|Traceback" $OUT/ratio.log | cut -c1-250
