#!/bin/bash
# fp8b37 run 4 (issue 36, session 34; the branch's last script): the default now waits for the transposed K^T with
# K's at the top of iteration 0 (kFp8BwdKtSmem); the lab kernel kt_wait_late (the op's diag kFp8BwdKtWaitLate) is run
# 3's default (the wait in the dQ issue of tile 0); bit 59 main_kernel = main 5d43a31f's kernel and pre-pass.
# (1) path_ab.py op main_kernel kt_wait_late: one profiled call of each path (the transposes' and the kernel's us);
# (2) tests: kt_zero (fixed: seqused_q <= seqused_k), kt_wait_late against the default (5 masks x 2 modes), S16K many
# groups (main_kernel, kt_wait_late), refusals; (3) lab_ab.py at B16 S16K (interleaved medians, back to back in
# rounds); (4) the headline's benchmark (--quick --reps 15 --no-dequant --variants main_kernel,default --short 12),
# bf16 beside it. `OUT=DIR timeout 56 bash .carry/fp8b37/run4.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
PYTHONPATH=$S timeout $(( 14 - SECONDS )) python3 -P $C/path_ab.py op main_kernel kt_wait_late > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
run_tests $(( 29 - SECONDS )) "kt_zero or lab_kt_wait_late or many_groups or refuses" tests/hstu/test_fp8_bwd.py
PYTHONPATH=$S timeout $(( 38 - SECONDS )) python3 -P $C/lab_ab.py --reps 24 --short 10 --rounds 3 > $OUT/lab_ab.log 2>&1
echo "lab_ab S16K rc $? ($SECONDS s)"
(cd $C/tree && PYTHONPATH=$S timeout $(( 55 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 15 \
    --no-dequant --variants main_kernel,default --short 12 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
cut -c1-520 $OUT/path_ab.log | grep -v Warn | grep -v "^  _warn" | tail -3
grep "^interleaved\|^short" $OUT/lab_ab.log | cut -c1-700
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-500
echo "fp8b37 run 4 done at $SECONDS s"
