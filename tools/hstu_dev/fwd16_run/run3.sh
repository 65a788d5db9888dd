#!/bin/bash
# fwd16 (issue 39, session 15), run 3 (<= 40 s; the final wheel), from the root of main's tree (main 794b180):
#   OUT=/tmp/o_fwd16 timeout 75 bash .carry/fwd16/run3.sh > /tmp/o_fwd16/stdout.txt 2>&1
# Confirms the default of the final commit (bf16 D = 256: the warp pairs at every row count where they fit):
# 1. GPU tests: the kernel the default and each cfg run, the default's rule (test_sm80_forward_gpu.py), the
#    sm80-class forward + backward at D = 256 (test_kernels_gpu.py sm80_and_sm90)
# 2. fwd16_time.py: main15's default against the final one + FA2 on issue 39's five shapes
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, the wheels, GPU, T, PT)
echo "== 1. GPU tests ($SECONDS s)"
run_tests 18 "long_rows or test_sm80_forward_candidate_runs_its_kernel or (256 and sm80_and_sm90)" \
    tests/hstu/test_sm80_forward_gpu.py tests/hstu/test_kernels_gpu.py
echo "== 2. time ($SECONDS s)"
SH=(--shapes "B16 S4K D128" "B16 S16K D128" "B128 S1K D128" "B16 S4K D256" "B16 S8K D64")
PYTHONPATH=/tmp/site_fwd16_main timeout 6 python3 -P $T main15 --cfgs 0 --no-fa2 --reps 8 "${SH[@]}" --masks \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_fwd16 timeout 8 python3 -P $T fwd16 --cfgs 0 --reps 8 "${SH[@]}" --masks >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests
echo "#### time (ms (TFLOP/s); main15 = main 794b180's wheel; fwd16 cfg 0 = the final default)"
grep -E "^###|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
