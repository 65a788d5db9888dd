#!/bin/bash
# fp8p32 run 2 (issue 36, session 29): the branch's FP8 backward path (the pre-pass launched first; its dO
# quantization reading dO once, 64 registers, 4 blocks an SM; its transposes' tile at 144 bytes a column for D <= 128,
# 8 blocks an SM) against fp8b32's default (its wheel, carried under base/whl). Tests: test_fp8_bwd.py, the GPU
# pre-pass tests (bit-equal to the reference, D 64 / 128 / 256) and the op against the fp64 emulation (block mode,
# five masks), the rows outside the sequences, graph capture. Then the headline's benchmark, one process a wheel
# (fp8b32's first): benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant (fp8b32: --variants default; the branch:
# --variants prepass_late,default), B16 S16K and S4K.
# `OUT=DIR timeout 56 bash .carry/fp8p32/run2.sh` from the root of main's tree (carry: fp8p32_run/pack.sh).
NAME=fp8p32 BASE=fp8p32/base
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 12 "cuda_prepass or (kernel_matches_emulating_reference and block) or rows_outside or graph_capture" \
    tests/hstu/test_fp8_bwd.py
B="python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant"
PYTHONPATH=/tmp/site_main timeout 17 $B --variants default > $OUT/bench_fp8b32.log 2>&1
echo "bench fp8b32 rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( 53 - SECONDS )) $B --variants prepass_late,default > $OUT/bench.log 2>&1
echo "bench fp8p32 rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
for f in bench_fp8b32 bench; do grep "^| B\|^- device" $OUT/$f.log | cut -c1-600; done
echo "fp8p32 run 2 done at $SECONDS s"
