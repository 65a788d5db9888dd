#!/bin/bash
# fp8b37 run 3 (issue 36, session 34): the branch's wheel with the lab kernel do_smem (kFp8BwdDoSmem, the op's diag:
# each tile's dO rows transposed from its dO^T in shared memory by the producer's warps 1-3, the pre-pass writes no
# do8) beside the default (kFp8BwdKtSmem: K^T transposed in each CTA) and bit 59 main_kernel (main 5d43a31f's kernel
# and pre-pass). (1) tests: kt_zero (both), do_smem against the default (5 masks x 2 modes, S16K many groups),
# main_kernel against the default, refusals; (2) the headline's benchmark (--quick --reps 15 --no-dequant
# --variants main_kernel,default --short 12), the bf16 backward beside it; (3) lab_ab.py at B16 S16K and S4K: default /
# main_kernel / do_smem interleaved with L2 flushes (medians) and back to back; (4) path_ab.py op main_kernel.
# `OUT=DIR timeout 56 bash .carry/fp8b37/run3.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 17 "kt_zero or lab_do_smem or many_groups or (variant_matches_the_kernel and main_kernel) or refuses" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 40 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 15 \
    --no-dequant --variants main_kernel,default --short 12 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 46 - SECONDS )) python3 -P $C/lab_ab.py --reps 30 --short 10 --rounds 3 > $OUT/lab_ab.log 2>&1
echo "lab_ab S16K rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 50 - SECONDS )) python3 -P $C/lab_ab.py --s 4096 --reps 40 --short 30 --rounds 3 >> $OUT/lab_ab.log 2>&1
echo "lab_ab S4K rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py op main_kernel > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^interleaved\|^short" $OUT/lab_ab.log | cut -c1-700
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-500
cut -c1-400 $OUT/path_ab.log | grep -v Warn | tail -2
echo "fp8b37 run 3 done at $SECONDS s"
