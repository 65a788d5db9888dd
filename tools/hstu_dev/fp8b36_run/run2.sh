#!/bin/bash
# fp8b36 run 2 (issue 36, session 33): the dq workspace's chunks zeroed just in time by the kernel (the first CTA
# whose tiles reach a chunk zeroes it, a few tiles ahead; the pre-pass zeroes only the flags; the finishing pass
# writes zeros for chunks no tile reached), option bit 60 main_path = main 8af609e7's path. (1) tests: self_zero
# (whole chunks no tile reaches), rows outside, graph capture, bad int32 vectors, the emulation in block mode,
# main_path against the default on five masks x two modes; (2) the headline's benchmark, main_path in two places
# (--quick --reps 20 --no-dequant --variants main_path,default,main_path --short 20); (3) path_ab.py op main_path.
# `OUT=DIR timeout 56 bash .carry/fp8b36/run2.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 20 "self_zero or rows_outside or graph_capture or (bad_int32 and default) or (kernel_matches_emulating and block) or (main_path and variant_matches_the_kernel and not many)" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 47 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 20 \
    --no-dequant --variants main_path,default,main_path --short 20 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py op main_path > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-560
cut -c1-420 $OUT/path_ab.log | grep -v Warn | tail -2
echo "fp8b36 run 2 done at $SECONDS s"
