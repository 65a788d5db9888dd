#!/bin/bash
# fp8b36 run 4 (issue 36, session 33; the final helper call): the final wheel, the dq workspace's chunks zeroed by
# the kernel (the pre-pass zeroes the first 4 chunks of each pair and the flags; key block n's producer warp 2
# zeroes chunk n + 4 of its pair; warp 1 makes sure of its CTA's chunks a few tiles ahead; the finishing pass writes
# zeros for chunks no tile reached), option bit 60 main_path = main 8af609e7's path. (1) tests: self_zero, the
# emulation (4 modes x 5 masks), main_path against the default (5 masks x 2 modes, S16K many groups, fp16), rows
# outside, graph capture, bad int32 vectors / scales, refusals, routing; (2) the headline's benchmark, default and
# main_path alternating (--quick --reps 20 --no-dequant --variants main_path,default,main_path,default --short 15);
# (3) path_ab.py op main_path; (4) compute-sanitizer memcheck of sanzero.py in the time left.
# `OUT=DIR timeout 56 bash .carry/fp8b36/run4.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 17 "self_zero or kernel_matches_emulating or (main_path and variant_matches) or rows_outside or graph_capture or bad_int32 or bad_scale or refuses or default_routing" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 40 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 20 \
    --no-dequant --variants main_path,default,main_path,default --short 15 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 46 - SECONDS )) python3 -P $C/path_ab.py op main_path > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=$S timeout $(( 54 - SECONDS )) $CS --tool memcheck --kernel-name kns=fp8_ python3 -P $C/sanzero.py $C/tree \
    > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-640
cut -c1-420 $OUT/path_ab.log | grep -v Warn | tail -2
grep "ERROR SUMMARY\|sanzero\|same\|DIFF" $OUT/san.log | head -4 | cut -c1-200
echo "fp8b36 run 4 done at $SECONDS s"
