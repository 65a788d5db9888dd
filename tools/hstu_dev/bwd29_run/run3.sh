#!/bin/bash
# bwd29 (issue 39, session 26), run 3 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd29 timeout 56 bash .carry/bwd29/run3.sh > /tmp/o_bwd29/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd29_run/pack.sh /work/main/.carry/bwd29)
# Wheel: run 2's (the default loops store dK / dV through shared memory; cfg 9 main's fragment-order stores) plus cfg
# 10 (bf16, sm_90+, no contexts): the default's loop with the rows written unswizzled and each sent by one
# cp.async.bulk (kPdsBulkEpilogue: no ld.shared / st.global by the warps).
# 1. GPU tests: cfg 10 and 9 against the fp32 reference and bitwise against the default (both grid orders, D = 64 /
#    128 / 256), which kernel runs
# 2. time: cfg 0 / 10 / 9 / FA2 at B128 S1K D128 / D64 / D256, B16 S4K D128
# 3. count: a and p (no-mask line, D128) under cfg 0 and 10
LIM=49
NAME=bwd29
BASE=main29
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_backward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 16 $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_one_barrier_runs_its_kernel
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 10 9 --reps 5 --impls ours fa2 \
    --shapes B128:S1024:D128 B128:S1024:D64 B128:S1024:D256 B16:S4096:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. count ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $C/count28.py --cfgs 0 10 \
    --causal 0 10 --iters 2 > $OUT/count.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the smem epilogue (16-byte row stores); cfg 10 = a cp.async.bulk a row; cfg 9 = main's stores"
