#!/bin/bash
# fp8b36 run 3 (issue 36, session 33): run 2's wheel. (1) compute-sanitizer memcheck of sanzero.py (the op on 40
# jagged sequences whose chunks the kernel zeroes, the default and main_path; kernels named fp8_*); (2) the wider
# tests (the emulation in tensor mode, main_path's S16K many-groups and fp16 tests, bad scales, the refusals, the
# routing); (3) the headline's benchmark again (--quick --reps 20 --no-dequant --variants main_path,default,main_path
# --short 20). `OUT=DIR timeout 56 bash .carry/fp8b36/run3.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
PYTHONPATH=$S timeout 15 $CS --tool memcheck --kernel-name kns=fp8_ python3 -P $C/sanzero.py $C/tree > $OUT/san.log 2>&1
echo "memcheck rc $? ($SECONDS s)"
run_tests $(( 36 - SECONDS )) "(kernel_matches_emulating and tensor) or (main_path and (many_groups or fp16_out)) or bad_scale or refuses or default_routing" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 20 \
    --no-dequant --variants main_path,default,main_path --short 20 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
grep "ERROR SUMMARY\|sanzero\|same\|DIFF\|rror" $OUT/san.log | head -6 | cut -c1-200
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-560
echo "fp8b36 run 3 done at $SECONDS s"
