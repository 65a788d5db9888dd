#!/bin/bash
# fp8b34 run 3 (issue 36, session 31): the final wheel (run 2: the fused pre-pass launch slower in the profile and
# the benchmark: dropped): main's pre-pass kernels with the descale check in the quantization grid's block 0, the
# finishing pass's owner search once per group, option bit 60 main_path = main 39ee30ed's path. test_fp8_bwd.py -k
# "bad_scale or nan_blocks or (main_path and kernel and not emulating and not many)"; the headline's benchmark again
# (--reps 50 --no-dequant --variants main_path,default); compute-sanitizer memcheck of sanbad.py (the FP8 backward op
# on good and bad int32 vectors and a NaN q_descale, the branch's path and main_path; kernels named fp8_*); then
# test_fp8.py -k "bounds_and_main_loop" in what time is left (the FP8 forward's 128-key launch written once: the
# grid kernels at D 64 / 128 / 256 and fp8_fwd_var=1, the launched kernel's name and bitwise output).
# `OUT=DIR timeout 56 bash .carry/fp8b34/run3.sh` from the root of main's tree (carry: fp8b34_run/pack.sh).
NAME=fp8b34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 9 "bad_scale or nan_blocks or (main_path and kernel and not emulating and not many)" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout 18 python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,default > $OUT/bench.log 2>&1
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
grep -E "passed|failed" $OUT/tests.log | cut -c1-200
echo "fp8b34 run 3 done at $SECONDS s"
