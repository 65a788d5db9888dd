#!/bin/bash
# fp8b36 run 1 (issue 36, session 33; the lead's call 1): the kernel's self-zeroing dq workspace (the default; the
# pre-pass zeroes only the grid's first group of pairs), option bit 60 main_path = main 8af609e7's path (the
# workspace zeroed whole by the pre-pass). (1) tests: the new self_zero cases, the variant tests of main_path (S16K
# many groups, fp16 out, bad vectors / scales), graph capture, rows outside, the emulation in block mode; (2) the
# headline's benchmark (--quick --reps 30 --no-dequant --variants main_path --short 30); (3) one profiled call of
# op / main_path (path_ab.py). `OUT=DIR timeout 56 bash .carry/fp8b36/run1.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 21 "self_zero or (main_path and (many_groups or fp16_out or bad_int32 or bad_scale)) or graph_capture or rows_outside or (kernel_matches_emulating and block and causal)" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 47 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 30 \
    --no-dequant --variants main_path,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py op main_path > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
cut -c1-420 $OUT/path_ab.log | grep -v Warn | tail -2
echo "fp8b36 run 1 done at $SECONDS s"
