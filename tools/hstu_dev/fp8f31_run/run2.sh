#!/bin/bash
# fp8f31 run 2 (issue 36, session 28; <= 50 s): the flipped wheel (the default FP8 forward kernels, D128 192-key and
# D256 64-key grid, with kBounds = run 1's var 1, SASS identical; kernel_options(fp8_fwd_var=1) = main's loop, SASS
# main's default kernels'). The forward tests that run the changed kernels, one pytest process, in file order: the
# 192-key tiles in every mode / mask against the fp64 emulation (20), D256's SiLU forms (6), the default against
# main's loop and the fp64 emulation (15), the wide-tile default for long sequences, D256's schedules bitwise the
# grid's (3); then compute-sanitizer memcheck of sancase.py (the default and var 1 at D128 / D256, three masks, two
# modes, bit-equal).
# `OUT=DIR timeout 56 bash .carry/fp8f31/run2.sh` from the root of main's tree (carry: fp8f31_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 33 "bn192 or (silu_forms and 256) or bounds_and_main_loop or wide_tiles or (schedules_match and 256)" \
    tests/hstu/test_fp8.py
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
(cd $C && PYTHONPATH=/tmp/site_$NAME timeout $(( 50 - SECONDS )) $CS --tool memcheck \
    --kernel-name kns=hstu_fwd_fp8_sm90_kernel python3 -P $C/sancase.py > $OUT/san.log 2>&1)
echo "memcheck rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -6  # (pytest's progress lines: the count if the summary is cut)
grep "ERROR SUMMARY\|sancase\|bit-equal\|rror" $OUT/san.log | head -16 | cut -c1-200
echo "fp8f31 run 2 done at $SECONDS s"
