#!/bin/bash
# fp8b34 run 4 (issue 36, session 31): the final wheel (36110042 = 04d9c1ad's code: the descale check in the
# quantization grid's block 0, the finishing pass's owner search once per group, main_path = main 39ee30ed's path).
# test_fp8_bwd.py -k "cuda_prepass or bad_int32 or graph_capture or rows_outside or check_scales_first or
# kernel_matches_emulating or default_routing or refuses or dq_error" (the default path against its fp64 emulation,
# 4 modes x 5 masks, the pre-pass bit-equal, the bad vectors, the capture, the routing); then the headline's
# benchmark (--reps 50 --no-dequant --variants main_path,default: a fourth sample of the deciding timing).
# `OUT=DIR timeout 56 bash .carry/fp8b34/run4.sh` from the root of main's tree (carry: fp8b34_run/pack.sh).
NAME=fp8b34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 25 "cuda_prepass or bad_int32 or graph_capture or rows_outside or check_scales_first or \
    kernel_matches_emulating or default_routing or refuses or dq_error" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 51 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|rror" $OUT/bench.log | cut -c1-400
echo "fp8b34 run 4 done at $SECONDS s"
