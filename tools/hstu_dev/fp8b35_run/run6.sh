#!/bin/bash
# fp8b35 run 6 (issue 36, session 32): run 5's wheel (the pre-pass's instruction cuts in the default; option bit 59
# main_prepass = main a9b26580's two pre-pass kernels). (1) test_fp8_bwd.py -k "kernel_matches_emulating or
# graph_capture or rows_outside or bad_int32 or default_routing or nan_blocks or refuses or bad_scale" (the default
# path against its fp64 emulation, 4 modes x 5 masks; the capture; the bad vectors; the routing); (2) the headline's
# benchmark again (--reps 50 --no-dequant --variants main_prepass,main_path,default --short 30): a second process.
# `OUT=DIR timeout 56 bash .carry/fp8b35/run6.sh` from the root of main's tree (carry: fp8b35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 26 "kernel_matches_emulating or graph_capture or rows_outside or bad_int32 or default_routing or \
    nan_blocks or refuses or bad_scale" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 \
    --no-dequant --variants main_prepass,main_path,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
echo "fp8b35 run 6 done at $SECONDS s"
