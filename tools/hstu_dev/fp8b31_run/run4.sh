#!/bin/bash
# fp8b31 run 4 (issue 36, session 28; only if the lead offers one): the headline's benchmark on the flipped default
# (benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant --variants main_kernel,default: bf16, the default = the amax tree,
# main31's kernel, the default again; B16 S16K and S4K, one process, random order, L2 flushed).
# `OUT=DIR timeout 56 bash .carry/fp8b31/run4.sh` from the root of main's tree (carry: fp8b31_run/pack.sh).
NAME=fp8b31 BASE=main31
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
PYTHONPATH=/tmp/site_$NAME timeout $(( 50 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_kernel,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
grep "^| B\|^| case\|rror" $OUT/bench.log | cut -c1-400
echo "fp8b31 run 4 done at $SECONDS s"
