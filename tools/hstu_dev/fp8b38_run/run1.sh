#!/bin/bash
# fp8b38 run 1 (issue 36, session 35): the default kernel adds dQ into dq's bf16 rows by one bulk tensor reduce-add
# per warp and tile (kFp8BwdDqTma, issued behind the next late part's dS8 fence; no dq workspace, no finishing pass
# over dq); bit 59 main_kernel = main 6ca06103's kernel and path; the lab kernel dq_tma_now (the op's diag
# kFp8BwdDqTmaNow: each reduce-add at once behind a fence of its own). (1) tests: the default against the fp64
# emulation (block, 5 masks), main_kernel and dq_tma_now against the default (dk / dv bit-equal, dq in the order
# bound), S16K many groups, rows outside, the 16K dq error; graph capture, fp16 outputs, refusals; (2) lab_ab.py at
# B16 S16K (interleaved medians, back to back in rounds); (3) path_ab.py (each kernel's us of one call per path).
# `OUT=DIR timeout 56 bash .carry/fp8b38/run1.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests $(( 31 - SECONDS )) "(kernel_matches_emulating and block) or (variant_matches_the_kernel and main_kernel) or (lab_dq_tma_now and block) or (many_groups and dq_tma_now) or rows_outside or dq_error_at_16k or graph_capture or refuses or fp16_out" tests/hstu/test_fp8_bwd.py
PYTHONPATH=$S timeout $(( 45 - SECONDS )) python3 -P $C/lab_ab.py --reps 20 --short 10 --rounds 3 > $OUT/lab_ab.log 2>&1
echo "lab_ab S16K rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 55 - SECONDS )) python3 -P $C/path_ab.py op main_kernel dq_tma_now > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^interleaved\|^short\|rror" $OUT/lab_ab.log | cut -c1-700
cut -c1-600 $OUT/path_ab.log | grep -v Warn | grep -v "^  _warn" | tail -3
echo "fp8b38 run 1 done at $SECONDS s"
