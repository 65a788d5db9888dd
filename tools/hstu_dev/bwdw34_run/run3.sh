#!/bin/bash
# bwdw34 (issue 39, session 31), run 3 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/out_bwdw34 timeout 56 bash .carry/bwdw34/run3.sh
# (carry: bash tools/hstu_dev/bwdw34_run/pack.sh /work/main/.carry/bwdw34; run 2's wheel, 827c8fab's kernels)
# 1. time at two more shapes: cfg 0 (the split S / dP) / 13 (the loop without it) / FA2 at B16 S8K D256 (batch
#    first) and B64 S2K D256 (heads first), median of 5, interleaved
# 2. the rest of the D = 256 sm80-class GPU tests: test_kernels_gpu.py's D = 256 layouts (the default for bf16 and
#    fp16, deterministic, masks, rab), which kernel runs, the FA2 layout against the old default, sm80 against sm90,
#    long contexts; test_sm80_backward_gpu.py's context kernel, long-context drab and the key-block limit at D = 256
LIM=49 NAME=bwdw34 BASE=main34
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 14 python3 -P $B21 time --label $NAME --cfgs 0 13 --reps 5 \
    --impls ours fa2 --shapes B16:S8192:D256 B64:S2048:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 1 )) $K::test_sm80_d256_backward_runs_the_layout_that_fits \
    $K::test_sm80_d256_backward_layouts $K::test_sm80_backward_fa2_layout_matches_the_old_default \
    $K::test_sm80_and_sm90_kernels_agree_with_reference $T::test_sm80_backward_context_kernel \
    $T::test_sm80_backward_long_contexts_drab $T::test_sm80_backward_refuses_too_many_key_blocks \
    $K::test_sm80_backward_with_long_contexts -k "256"
digest "cfg 0 = the default (D = 256: the split S / dP); 13 = the loop without it (main's)"
grep -E "PASSED|FAILED|SKIPPED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
