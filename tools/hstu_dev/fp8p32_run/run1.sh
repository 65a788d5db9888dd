#!/bin/bash
# fp8p32 run 1 (issue 36, session 29): the FP8 backward's path outside its kernel. The branch's wheel: the pre-pass
# launched right after the workspace's allocation (option bit 60 prepass_late: fp8b32's order), and the pre-pass's
# dO quantization reading dO once (registers, D <= 128). Tests: test_fp8_bwd.py -k "prepass or refuses_a_variant"
# (the pre-pass bit-equal to its reference at D 64 / 128 / 256, prepass_late against the default and the fp64
# emulation, the refusals). path_gaps.py at B16 S16K: the benchmark's measure (L2 flush, events) against the same
# call with the host's prelude hidden behind a 1 ms device sleep, for the op, the op with prepass_late and
# fp8_bwd_sm90 called directly; host ms; profiled calls' kernels, gaps, launches. Then main 4d2d71ae's pre-pass
# kernels (its wheel, = fp8b32's pre-pass) timed alone first, the branch's in path_gaps.py.
# `OUT=DIR timeout 56 bash .carry/fp8p32/run1.sh` from the root of main's tree (carry: fp8p32_run/pack.sh).
NAME=fp8p32 BASE=main32
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
PYTHONPATH=/tmp/site_main timeout 10 python3 -P $C/path_gaps.py --reps 20 --prepass-only > $OUT/pre_main.log 2>&1
echo "prepass main rc $? ($SECONDS s)"
run_tests 16 "prepass or refuses_a_variant" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 52 - SECONDS )) python3 -P $C/path_gaps.py --reps 20 > $OUT/gaps.log 2>&1
echo "path_gaps rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep -v "^launches\|^kernels" $OUT/gaps.log | cut -c1-400
grep "^launches\|^kernels" $OUT/gaps.log | cut -c1-900
grep -h "prepass only\|rror" $OUT/pre_main.log | cut -c1-400
echo "fp8p32 run 1 done at $SECONDS s"
