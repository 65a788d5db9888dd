#!/bin/bash
# fp8b34 run 2 (issue 36, session 31). Run 1: the quantization with its rows in registers (3 blocks an SM) measured
# 371 against main's 295 us, the path slower than main_path: dropped. Now: main's quantization kernel with the
# descale check in its grid's block 0 and the transposes' blocks interleaved with its blocks in one launch
# (fp8_prepass_fused_kernel: the default, and the fp8_bwd_prepass op's), the finishing pass's owner search once per
# group; bit 57 prepass_split = the default but the pre-pass's two launches; bit 60 main_path = main 39ee30ed's
# path; the FP8 forward's 128-key launch written once. Tests: test_fp8_bwd.py -k "cuda_prepass or bad_scale or
# bad_int32 or ((main_path or prepass_split) and kernel and not emulating and not many) or check_scales_first or
# graph_capture"; the headline's benchmark with --variants main_path,prepass_split,default; path_ab.py.
# `OUT=DIR timeout 56 bash .carry/fp8b34/run2.sh` from the root of main's tree (carry: fp8b34_run/pack.sh).
NAME=fp8b34 BASE=main34
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 20 "cuda_prepass or bad_scale or bad_int32 or ((main_path or prepass_split) and kernel and not emulating and \
    not many) or check_scales_first or graph_capture" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 46 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,prepass_split,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( 53 - SECONDS )) python3 -P $C/path_ab.py > $OUT/gaps.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|rror" $OUT/bench.log | cut -c1-420
cut -c1-600 $OUT/gaps.log | tail -3
echo "fp8b34 run 2 done at $SECONDS s"
