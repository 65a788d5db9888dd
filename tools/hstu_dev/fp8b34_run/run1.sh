#!/bin/bash
# fp8b34 run 1 (issue 36, session 31): the FP8 backward's path outside its kernel. The branch's wheel: the pre-pass's
# quantization with each block's rows in registers (one read of dout, every load in flight, the dq workspace's zeros
# stored under the loads; 3 blocks an SM) and the descale factors' check in its first block (no one-block launch of
# its own); option bit 60 main_path = main 39ee30ed's path. Tests: test_fp8_bwd.py -k "cuda_prepass or bad_scale or
# bad_int32 or (main_path and kernel and not emulating) or check_scales_first or graph_capture or rows_outside".
# Then the headline's benchmark (--reps 50 --no-dequant --variants main_path,default), then path_ab.py (one profiled
# call of each path at B16 S16K: each kernel's length) in what time is left.
# `OUT=DIR timeout 56 bash .carry/fp8b34/run1.sh` from the root of main's tree (carry: fp8b34_run/pack.sh).
NAME=fp8b34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 20 "cuda_prepass or bad_scale or bad_int32 or (main_path and kernel and not emulating) or \
    check_scales_first or graph_capture or rows_outside" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 45 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( 52 - SECONDS )) python3 -P $C/path_ab.py > $OUT/gaps.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8_bwd.py [.sFE]*' $OUT/tests.log | tail -1)"
grep "^| B\|rror" $OUT/bench.log | cut -c1-400
cut -c1-600 $OUT/gaps.log | tail -2
echo "fp8b34 run 1 done at $SECONDS s"
