#!/bin/bash
# fp8b35 run 3 (issue 36, session 32): the flipped wheel (kFp8BwdDqRows in the default: dQ added in bf16 straight into
# dq's rows; option bit 59 main_kernel = main a9b26580's kernel with its dq groups and finishing pass = main's path).
# (1) test_fp8_bwd.py -k "kernel_matches_emulating or main_kernel or graph_capture or rows_outside or
# default_routing or dq_error or refuses" (the default against its fp64 emulation, 4 modes x 5 masks; main_kernel
# against the default: dk / dv bit-equal, dq within the bf16 order bound; the capture; the bad vectors; float16); (2)
# the headline's benchmark (--reps 50 --no-dequant --variants main_kernel,main_path,default --short 30); (3) one
# profiled call of op / main_kernel (path_ab.py).
# `OUT=DIR timeout 56 bash .carry/fp8b35/run3.sh` from the root of main's tree (carry: fp8b35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 25 "kernel_matches_emulating or main_kernel or graph_capture or rows_outside or default_routing or \
    dq_error or refuses" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 46 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 \
    --no-dequant --variants main_kernel,main_path,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py op main_kernel > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
cut -c1-600 $OUT/path_ab.log | grep -v Warn | tail -2
echo "fp8b35 run 3 done at $SECONDS s"
