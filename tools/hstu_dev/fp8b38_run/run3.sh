#!/bin/bash
# fp8b38 run 3 (issue 36, session 35). Runs 1-2: the default (kFp8BwdDqTma: dQ by bulk tensor reduce-adds into dq's
# bf16 rows) correct but 1.093-1.096x main's path interleaved, kernel +9.0-9.7 %; grouping a batch's heads (so the CTAs
# running together fill dq's rows) did not help (1.093x): the DRAM-page reading is wrong. This run splits the
# kernel's cost with timing-only variants of the op's diag (wrong dq, timings only): no_reduce (kFp8BwdDiagNoReduce:
# the slots stored by stmatrix, fenced, waited for, no bulk reduce-add) and no_dq (kFp8BwdDiagNoDq: no dQ adds at all,
# the dQ GEMM still runs). (1) lab_ab.py at B16 S16K (default, main_kernel, no_reduce, no_dq); (2) path_ab.py of the
# four (each kernel's us). `OUT=DIR timeout 56 bash .carry/fp8b38/run3.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
PYTHONPATH=$S timeout $(( 30 - SECONDS )) python3 -P $C/lab_ab.py --reps 24 --short 10 --rounds 2 > $OUT/lab_ab.log 2>&1
echo "lab_ab S16K rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 46 - SECONDS )) python3 -P $C/path_ab.py op main_kernel no_reduce no_dq > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 55 - SECONDS )) python3 -P $C/path_ab.py no_dq no_reduce main_kernel op > $OUT/path_ab2.log 2>&1
echo "path_ab (reverse order) rc $? ($SECONDS s)"
echo "#### digest: $GPU"
grep "^interleaved\|^short\|rror" $OUT/lab_ab.log | cut -c1-800
for f in path_ab path_ab2; do
  grep -v Warn $OUT/$f.log | grep -v "^  _warn" | sed "s/void hstu::(anonymous namespace)/k/g; s/hstu::(anonymous namespace)::hst/chk/; s/void hstu::sm90::hstu_bwd_fp8_sm/KERNEL/" | cut -c1-330 | tail -4
done
echo "fp8b38 run 3 done at $SECONDS s"
