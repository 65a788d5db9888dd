#!/bin/bash
# fp8b35 run 2 (issue 36, session 32): the branch's wheel with dq_rows (option bit 59, kFp8BwdDqRows: dQ added in bf16
# straight into dq's rows, K^T's rows permuted by the pre-pass, no finishing pass over dq). (1) test_fp8_bwd.py -k
# "dq_rows or dq_error or rows_outside or cuda_prepass_bit" (the variant against the fp64 emulation on 5 masks, against
# the default (dk / dv bit-equal, dq within the bf16 order bound), the bad int32 vectors, float16 gradients, the 16K
# sequence's dq error; the public pre-pass still bit-equal); (2) the headline's benchmark (--reps 50 --no-dequant
# --variants main_path,dq_rows,default --short 30); (3) one profiled call of op / main_path / dq_rows (path_ab.py).
# `OUT=DIR timeout 56 bash .carry/fp8b35/run2.sh` from the root of main's tree (carry: fp8b35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests 24 "dq_rows or dq_error or rows_outside or cuda_prepass_bit" tests/hstu/test_fp8_bwd.py
(cd $C/tree && PYTHONPATH=$S timeout $(( 45 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 \
    --no-dequant --variants main_path,dq_rows,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 54 - SECONDS )) python3 -P $C/path_ab.py dq_rows op main_path > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
cut -c1-600 $OUT/path_ab.log | grep -v Warn | tail -3
echo "fp8b35 run 2 done at $SECONDS s"
