#!/bin/bash
# fp8b37 run 2 (issue 36, session 34): the branch's wheel, K^T transposed in each CTA's shared memory from its K tile
# (kFp8BwdKtSmem, the default; the pre-pass's transposes write Q^T only) against option bit 59 main_kernel (= main
# 5d43a31f's kernel and pre-pass, K^T from the pre-pass). (1) tests: kt_zero (NaN keys past seqused_k), main_kernel
# against the default (5 masks x 2 modes, S16K many groups, fp16 out), the emulation (4 modes x 5 masks), refusals,
# rows outside, graph capture, dq error at 16K; (2) the headline's benchmark, main_kernel and default alternating
# (--quick --reps 20 --no-dequant --variants main_kernel,default,main_kernel,default --short 15), bf16 beside them;
# (3) path_ab.py op main_kernel: one profiled call of each path (the transposes' and the kernel's lengths).
# `OUT=DIR timeout 56 bash .carry/fp8b37/run2.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 18 "kt_zero or main_kernel or kernel_matches_emulating or refuses or rows_outside or graph_capture or dq_error" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 47 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 20 \
    --no-dequant --variants main_kernel,default,main_kernel,default --short 15 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py op main_kernel > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-640
cut -c1-420 $OUT/path_ab.log | grep -v Warn | tail -2
echo "fp8b37 run 2 done at $SECONDS s"
