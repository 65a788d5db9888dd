#!/bin/bash
# fp8b38 run 1 (issue 36, session 35): the default kernel adds dQ into dq's bf16 rows by one bulk tensor reduce-add
# per warp and tile (kFp8BwdDqTma; no dq workspace, no finishing pass over dq); bit 59 main_kernel = main 6ca06103's
# kernel and path. (1) tests: the default against the fp64 emulation (block, 5 masks), main_kernel against the default
# (dk / dv bit-equal, dq in the order bound; 5 masks x 2 modes, S16K many groups), rows outside, graph capture,
# fp16 outputs, refusals, the 16K dq error; (2) lab_ab.py at B16 S16K (interleaved medians, back to back in rounds);
# (3) path_ab.py op main_kernel (each kernel's us). `OUT=DIR timeout 56 bash .carry/fp8b38/run1.sh` from main's root.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests $(( 30 - SECONDS )) "(kernel_matches_emulating and block) or (variant_matches_the_kernel and main_kernel) or rows_outside or graph_capture or refuses or dq_error_at_16k or fp16_out" tests/hstu/test_fp8_bwd.py
PYTHONPATH=$S timeout $(( 43 - SECONDS )) python3 -P $C/lab_ab.py --reps 20 --short 10 --rounds 3 > $OUT/lab_ab.log 2>&1
echo "lab_ab S16K rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 55 - SECONDS )) python3 -P $C/path_ab.py op main_kernel > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^interleaved\|^short\|rror" $OUT/lab_ab.log | cut -c1-700
cut -c1-520 $OUT/path_ab.log | grep -v Warn | grep -v "^  _warn" | tail -3
echo "fp8b38 run 1 done at $SECONDS s"
