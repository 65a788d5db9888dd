#!/bin/bash
# fp8b37 run 1 (issue 36, session 34; the lead's call 1): main 5d43a31f's path only (the carried wheel is main's), the
# facts before the change: (1) path_ab.py op main_path: one profiled call of the path at B16 S16K, each kernel's
# start and length (quantization, transposes Q^T + K^T, kernel, finishing pass); (2) the headline's benchmark with
# the bf16 backward beside it (the board), main's default and bit 59 main_kernel (--quick --reps 20 --no-dequant
# --short 15). `OUT=DIR timeout 56 bash .carry/fp8b37/run1.sh` from the root of main's tree.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_main
PYTHONPATH=$S timeout $(( 16 - SECONDS )) python3 -P $C/path_ab.py op op > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
(cd $R && PYTHONPATH=$S timeout $(( 53 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 20 \
    --no-dequant --variants main_kernel,default --short 15 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
cut -c1-460 $OUT/path_ab.log | grep -v Warn | tail -2
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-640
echo "fp8b37 run 1 done at $SECONDS s"
