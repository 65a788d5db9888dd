#!/bin/bash
# fp8b34 run 2 (issue 36, session 31): run 1's product code plus the FP8 forward's 128-key launch written once (a
# lambda like the 192-key `wide`). Tests: test_fp8.py -k "bounds_and_main_loop or copy_and_tile_cuts" (the grid
# kernels at D 64 / 128 / 256 and their fp8_fwd_var 1 / 2 / 3 variants: the launched kernel's name and bitwise
# output). Then compute-sanitizer memcheck of fp8b33's sanbad.py (the FP8 backward op on good and bad int32 vectors,
# the branch's path and main_path; kernels named fp8_*: the pre-pass's quantization in registers with the descale
# check in its first block, the transposes, the finishing pass, the FP8 backward kernel).
# `OUT=DIR timeout 56 bash .carry/fp8b34/run2.sh` from the root of main's tree (carry: fp8b34_run/pack.sh).
NAME=fp8b34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 24 "bounds_and_main_loop or copy_and_tile_cuts" tests/hstu/test_fp8.py
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout $(( 51 - SECONDS )) $CS --tool memcheck --kernel-name kns=fp8_ python3 -P \
    $C/sanbad.py > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8.py [.sFE]*' $OUT/tests.log | tail -1 | cut -c1-120)"
grep "ERROR SUMMARY\|sanbad\|ok False\|rror" $OUT/san.log | head -8 | cut -c1-200
echo "fp8b34 run 2 done at $SECONDS s"
