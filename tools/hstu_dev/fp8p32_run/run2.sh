#!/bin/bash
# fp8p32 run 2 (issue 36, session 29): the branch's FP8 backward path (the pre-pass launched first; its transposes'
# tile at 144 bytes a column for D <= 128: 32 registers, 8 blocks an SM; the dO quantization as fp8b32's, run 1's
# one-read variant dropped) against fp8b32's default (its wheel, carried under base/whl). Tests: test_fp8_bwd.py,
# the GPU pre-pass tests (bit-equal to the reference, D 64 / 128 / 256), the op's rows outside the sequences (against
# the fp64 emulation) and its graph capture (run 1 ran the reordered op against the emulation: prepass_late's tests). Then the headline's benchmark, one process a
# wheel (fp8b32's first): benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant (fp8b32: --variants default; the
# branch: --variants prepass_late,default), B16 S16K and S4K.
# `OUT=DIR timeout 56 bash .carry/fp8p32/run2.sh` from the root of main's tree (carry: fp8p32_run/pack.sh).
NAME=fp8p32 BASE=fp8p32/base
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 10 "cuda_prepass or rows_outside or graph_capture" tests/hstu/test_fp8_bwd.py
B="python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant"
PYTHONPATH=/tmp/site_main timeout 17 $B --variants default > $OUT/bench_fp8b32.log 2>&1
echo "bench fp8b32 rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( 53 - SECONDS )) $B --variants prepass_late,default > $OUT/bench.log 2>&1
echo "bench fp8p32 rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
for f in bench_fp8b32 bench; do grep "^| B\|^- device" $OUT/$f.log | cut -c1-600; done
echo "fp8p32 run 2 done at $SECONDS s"
