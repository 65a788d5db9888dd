#!/bin/bash
# fp8b34 run 3 (issue 36, session 31): run 2's wheel. The headline's benchmark again (--reps 50 --no-dequant
# --variants main_path,prepass_split,default: another sample), compute-sanitizer memcheck of sanbad.py (the FP8
# backward op on good and bad int32 vectors and a NaN q_descale, the branch's path and main_path; kernels named
# fp8_*: the pre-pass's fused kernel with the descale check in its block 0, main's two pre-pass kernels, the
# finishing pass, the FP8 backward kernel), then test_fp8.py -k "bounds_and_main_loop" in what time is left (the FP8
# forward's 128-key launch written once: the grid kernels at D 64 / 128 / 256 and fp8_fwd_var=1, the launched
# kernel's name and bitwise output).
# `OUT=DIR timeout 56 bash .carry/fp8b34/run3.sh` from the root of main's tree (carry: fp8b34_run/pack.sh).
NAME=fp8b34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
PYTHONPATH=/tmp/site_$NAME timeout 18 python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,prepass_split,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 17 $CS --tool memcheck --kernel-name kns=fp8_ python3 -P $C/sanbad.py \
    > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
run_tests $(( 52 - SECONDS )) "bounds_and_main_loop" tests/hstu/test_fp8.py
echo "#### digest: $GPU"
grep "^| B\|rror" $OUT/bench.log | cut -c1-400
grep "ERROR SUMMARY\|sanbad\|ok False\|rror" $OUT/san.log | head -8 | cut -c1-200
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8.py [.sFE]*' $OUT/tests.log | tail -1 | cut -c1-120)"
echo "fp8b34 run 3 done at $SECONDS s"
