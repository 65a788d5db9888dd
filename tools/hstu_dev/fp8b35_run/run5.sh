#!/bin/bash
# fp8b35 run 5 (issue 36, session 32; the lead's call 3): dO's quantization by each block factor's reciprocal with one
# correction (the default for bf16 dout; bit-equal to the IEEE division, tools/hstu_dev/fp8b35_run/rcp_check.py),
# option bit 59 main_prepass = main a9b26580's IEEE divisions. (1) test_fp8_bwd.py -k "cuda_prepass or main_prepass or
# dq_error" (the pre-pass bit-equal to its reference at D 64 / 128 / 256, NaN / inf blocks, every finite bf16 value;
# main_prepass against the default and the fp64 emulation); (2) the headline's benchmark (--reps 50 --no-dequant
# --variants main_prepass,main_path,default --short 30); (3) one profiled call of op / main_prepass (path_ab.py).
# `OUT=DIR timeout 56 bash .carry/fp8b35/run5.sh` from the root of main's tree (carry: fp8b35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 22 "cuda_prepass or main_prepass or dq_error" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 44 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 \
    --no-dequant --variants main_prepass,main_path,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py op main_prepass > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
cut -c1-420 $OUT/path_ab.log | grep -v Warn | tail -2
echo "fp8b35 run 5 done at $SECONDS s"
