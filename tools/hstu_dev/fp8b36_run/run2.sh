#!/bin/bash
# fp8b36 run 2 (issue 36, session 33; the lead's call 2): run 1's wheel (the kernel's self-zeroing dq workspace as
# the default, option bit 60 main_path = main 8af609e7's path). (1) compute-sanitizer memcheck of sanzero.py (the op
# on 40 jagged sequences, most pairs zeroed by the kernel, the default and main_path; kernels named fp8_*); (2) the
# wider tests (the default against the fp64 emulation in every mode and mask, main_path's variant tests, the refusals,
# the routing); (3) the headline's benchmark with S4K (--reps 20 --no-dequant --variants main_path,default --short 20).
# `OUT=DIR timeout 56 bash .carry/fp8b36/run2.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=$S timeout 14 $CS --tool memcheck --kernel-name kns=fp8_ python3 -P $C/sanzero.py $C/tree > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
run_tests $(( 34 - SECONDS )) "kernel_matches_emulating or (main_path and variant_matches_the_kernel and not many) or refuses or default_routing or self_zero" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 20 \
    --no-dequant --variants main_path,default --short 20 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
grep "ERROR SUMMARY\|sanzero\|same\|DIFF\|rror" $OUT/san.log | head -6 | cut -c1-200
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
echo "fp8b36 run 2 done at $SECONDS s"
