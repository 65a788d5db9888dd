#!/bin/bash
# fp8b33 run 2 (issue 36, session 30): run 1's path plus the pre-pass's quantization and transposes on 1-D grids with
# the head fastest (main_path keeps main's grids) and the descale check's loads batched (wheel of 078443aa). Tests:
# test_fp8_bwd.py -k "cuda_prepass or (main_path and kernel and not emulating) or check_scales_first or bad_scale"
# (the bad int32 vectors: sanbad.py below); the headline's benchmark (--reps 50 --no-dequant --variants main_path,default); then compute-sanitizer
# memcheck of sanbad.py (the op on good and bad int32 vectors, the branch's path and main_path; kernels named fp8_*:
# the pre-pass, the finishing pass, the FP8 backward kernel).
# `OUT=DIR timeout 56 bash .carry/fp8b33/run2.sh` from the root of main's tree (carry: fp8b33_run/pack.sh).
NAME=fp8b33 BASE=main33
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 13 "cuda_prepass or (main_path and kernel and not emulating) or check_scales_first or bad_scale" \
    tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout 19 python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout $(( 49 - SECONDS )) $CS --tool memcheck --kernel-name kns=fp8_ \
    python3 -P $C/sanbad.py > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|rror" $OUT/bench.log | cut -c1-400
grep "ERROR SUMMARY\|sanbad\|ok False\|rror" $OUT/san.log | head -8 | cut -c1-200
echo "fp8b33 run 2 done at $SECONDS s"
