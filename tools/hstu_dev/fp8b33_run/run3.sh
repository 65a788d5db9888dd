#!/bin/bash
# fp8b33 run 3 (issue 36, session 30), the final wheel (run 2's, 078443aa's product code): the headline's benchmark
# again (--reps 50 --no-dequant --variants main_path,default: a second sample of run 2's wheel), compute-sanitizer
# memcheck of sanbad.py (the op on good and bad int32 vectors, the branch's path and main_path; kernels named fp8_*:
# the pre-pass, the finishing pass, the FP8 backward kernel), then path_ab.py (one profiled call of each path at
# B16 S16K: every kernel's length).
# `OUT=DIR timeout 56 bash .carry/fp8b33/run3.sh` from the root of main's tree (carry: fp8b33_run/pack.sh).
NAME=fp8b33 BASE=main33
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
PYTHONPATH=/tmp/site_$NAME timeout 17 python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 17 $CS --tool memcheck --kernel-name kns=fp8_ python3 -P $C/sanbad.py \
    > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( 49 - SECONDS )) python3 -P $C/path_ab.py > $OUT/gaps.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
grep "^| B\|rror" $OUT/bench.log | cut -c1-400
grep "ERROR SUMMARY\|sanbad\|ok False\|rror" $OUT/san.log | head -8 | cut -c1-200
cut -c1-700 $OUT/gaps.log | tail -4
echo "fp8b33 run 3 done at $SECONDS s"
