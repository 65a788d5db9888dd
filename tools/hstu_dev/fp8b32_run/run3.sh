#!/bin/bash
# fp8b32 run 3 (issue 36, session 29): the flipped default (kFp8BwdDs8Early in kFp8BwdDefault; option bit 59
# main_kernel = main 4d2d71ae's kernel). test_fp8_bwd.py -k "main_kernel or refuses_a_variant" (main's kernel
# against the default: dk / dv bit-equal, five masks x two modes, S16K with many groups; main's kernel against the
# fp64 emulation on five masks; the refusals), then the headline's benchmark (benchmarks/hstu_fp8_bwd.py --reps 50
# --no-dequant --variants main_kernel,default: bf16, the default, main's kernel, the default again; B16 S16K and
# S4K, one process, random order, L2 flushed).
# `OUT=DIR timeout 56 bash .carry/fp8b32/run3.sh` from the root of main's tree (carry: fp8b32_run/pack.sh).
NAME=fp8b32 BASE=main32
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 15 "main_kernel or refuses_a_variant" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 50 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_kernel,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8_bwd.py [.sFE]*' $OUT/tests.log | tail -1)"
grep "^| B\|^| case\|rror" $OUT/bench.log | cut -c1-400
echo "fp8b32 run 3 done at $SECONDS s"
