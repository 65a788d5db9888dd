#!/bin/bash
# bwdw33 (issue 39, session 30), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwdw33 timeout 56 bash .carry/bwdw33/run2.sh > /tmp/o_bwdw33/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwdw33_run/pack.sh /work/main/.carry/bwdw33; run 1's wheel)
# 1. time (the second run): cfg 0 / 10 / 13 / FA2 at B16 S4K D256, B128 S1K D256 / D128, median of 9, interleaved
# 2. GPU tests of the new D = 256 default: every D = 256 case of test_sm80_backward_gpu.py's loop tests (the loop
#    cfgs 1-3, 6, 7, 9-15 against the fp32 reference and bitwise the default's dK / dV / drab: jagged / dense, masks,
#    contexts, targets, delta-q, seqused, rab / drab, the deterministic dQ kernel), batch first, the tail order, the
#    dQ workspace layouts, the context kernel, then test_kernels_gpu.py's D = 256 layout tests (bf16 and fp16)
LIM=49 NAME=bwdw33 BASE=main33
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 14 python3 -P $B21 time --label $NAME --cfgs 0 10 13 --reps 9 \
    --impls ours fa2 --shapes B16:S4096:D256 B128:S1024:D256 B128:S1024:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 1 )) $T::test_sm80_backward_one_barrier $T::test_sm80_backward_mbar_batch_first \
    $T::test_sm80_backward_tail_blocks_first $T::test_sm80_backward_dq_workspace_layouts \
    $T::test_sm80_backward_context_kernel $K::test_sm80_d256_backward_layouts \
    $K::test_sm80_d256_backward_runs_the_layout_that_fits $K::test_sm80_backward_fa2_layout_matches_the_old_default \
    -k "256 or mbar or d256"
digest "cfg 0 = the default (D = 256: stmatrix P / dS + pointer copies); 10 = main's loop; 13 = 0 + the warps' own epilogue"
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
