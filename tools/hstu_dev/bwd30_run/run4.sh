#!/bin/bash
# bwd30 (issue 39, session 27), run 4 (the lead's offer: the merge decision; <= 50 s), from the root of main's tree:
#   OUT=/tmp/o_bwd30 timeout 56 bash .carry/bwd30/run4.sh > /tmp/o_bwd30/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd30_run/pack.sh /work/main/.carry/bwd30)
# Wheel: the final code: D = 64 / 128's sm_90+ one-barrier loops store P / dS by stmatrix and copy the next Q / dO
# tile from pointers formed once per key block (run 3's cfg 11, now the default, both dtypes); cfg 10 = main's loop,
# 11 / 12 = without the pointer copies / without stmatrix.
# 1. the whole tests/hstu/test_sm80_backward_gpu.py and test_kernel_options.py (the branch's files and the sources
#    the latter reads, in the carry's tree), -q -x
# 2. one timing line: B16 S4K D128, the default / cfg 10 (main's loop) / FA2
LIM=50
NAME=bwd30
BASE=main30
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, digest)
echo "== 1. GPU tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout 40 python3 -P -m pytest -q -x -p no:cacheprovider \
    --import-mode=importlib --tb=short -rfE tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernel_options.py \
    > $OUT/tests.log 2>&1)
echo "rc $? (124: time ran out; $SECONDS s)"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label $NAME \
    --cfgs 0 10 --reps 3 --impls ours fa2 --shapes B16:S4096:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
tail -15 $OUT/tests.log | cut -c1-250
echo "#### time (ms; cfg 0 = the new default; cfg 10 = main's loop)"
cut -c1-250 $OUT/time.log
