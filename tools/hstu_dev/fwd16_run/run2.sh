#!/bin/bash
# fwd16 (issue 39, session 15), run 2 (<= 45 s), from the root of main's tree (main 794b180 on the device):
#   OUT=/tmp/o_fwd16 timeout 75 bash .carry/fwd16/run2.sh > /tmp/o_fwd16/stdout.txt 2>&1
# The new default: bf16 D = 256 runs the warp pairs (fwd_sm80_cfg 1, 64 x 64) at every row count where they fit
# (run 1: 1.523 ms at B16 S4K against the old default's 1.715 and FA2's 1.848).
# 1. GPU tests (branch files in .carry/fwd16/tree): the kernel each cfg and the default run (D = 256), the default's
#    rule at every D, the sm80-class forward + backward at D = 256 on jagged batches with delta-q and masks
#    (test_kernels_gpu.py sm80_and_sm90, GR convention); then the D = 64 / 128 candidates not run in run 1
# 2. fwd16_time.py: main15's wheel cfg 0 against the branch's cfg 0 (the new default) / 2 (the old one at D = 256)
#    + FA2 on issue 39's shapes and D = 256 at 1K / 256 rows; the jagged Zipf batch; contexts
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, the wheels, GPU, T, PT)
echo "== 1. GPU tests ($SECONDS s)"
run_tests 15 "long_rows or (256 and (runs_its_kernel or sm80_and_sm90 or gr_convention_both))" \
    tests/hstu/test_sm80_forward_gpu.py tests/hstu/test_kernels_gpu.py
run_tests 9 "test_sm80_forward_candidates and (128 or 64) and not gr_convention" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
SH=(--shapes "B16 S4K D256" "B64 S1K D256" "B256 S256 D256" "B16 S8K D64" "B16 S4K D128" "B16 S16K D128"
    "B128 S1K D128")
MS=(--masks "D256 causal" "D256 ctx64" "D128 causal" "D128 ctx64" "D64 causal" "D64 ctx64")
PYTHONPATH=/tmp/site_fwd16_main timeout 7 python3 -P $T main15 --cfgs 0 --no-fa2 --reps 8 --mask-cfgs 0 "${SH[@]}" \
    "${MS[@]}" --jagged-cfgs 0 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_fwd16 timeout 10 python3 -P $T fwd16 --cfgs 0 2 --reps 8 --mask-cfgs 0 2 "${SH[@]}" "${MS[@]}" \
    --jagged-cfgs 0 2 6 >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests
echo "#### time (ms (TFLOP/s); main15 = main 794b180's wheel; branch cfg 0 = the new default, 2 = the old at D256)"
grep -E "^###|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
