#!/bin/bash
# bwdw33 (issue 39, session 30), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwdw33 timeout 56 bash .carry/bwdw33/run2.sh > /tmp/o_bwdw33/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwdw33_run/pack.sh /work/main/.carry/bwdw33: the branch's wheel)
# Wheel: D = 256's default with P / dS by stmatrix and the Q / dO copies from pointers (cfg 10 = main's loop, its
# template arguments and code); cfg 13 at D = 128 / 256 = the default with each warp's own dK / dV epilogue.
# 1. time: cfg 0 / 10 / 13 / FA2 at B16 S4K D256 (batch first), B128 S1K D256 / D128 (heads first), median of 7,
#    interleaved (at D = 128 cfg 10 runs D = 128's loop without stmatrix / pointer copies)
# 2. GPU tests, most specific first: the stmatrix cfgs at D = 256 (10 / 11 / 12 against the fp32 reference, dK / dV
#    / drab bitwise the default's), the kernel each cfg runs (D = 128 / 256, bf16 and fp16), the smem epilogue test
#    with cfg 13 (D = 128 / 256), D = 256 batch first, the tail order, the default's kernel name, the dQ workspace
#    layouts, the context kernel, then every D = 256 case of the loop test (all cfgs, masks, rab / drab, ...)
LIM=49 NAME=bwdw33 BASE=main33
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $B21 time --label $NAME --cfgs 0 10 13 --reps 7 \
    --impls ours fa2 --shapes B16:S4096:D256 B128:S1024:D256 B128:S1024:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 1 )) $T::test_sm80_backward_stsm_pds \
    $T::test_sm80_backward_one_barrier_runs_its_kernel $T::test_sm80_backward_smem_epilogue \
    $T::test_sm80_backward_mbar_batch_first $T::test_sm80_backward_tail_blocks_first \
    $K::test_sm80_backward_candidate_runs_its_kernel $T::test_sm80_backward_dq_workspace_layouts \
    $T::test_sm80_backward_context_kernel $T::test_sm80_backward_one_barrier \
    -k "256 or mbar or (epilogue and 128) or (runs_its_kernel and 128)"
digest "cfg 0 = the default (D = 256: stmatrix P / dS + pointer copies); 10 = main's loop; 13 = 0 + the warps' own epilogue"
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
