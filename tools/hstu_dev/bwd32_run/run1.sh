#!/bin/bash
# bwd32 (issue 39, session 29), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd32 timeout 56 bash .carry/bwd32/run1.sh > /tmp/o_bwd32/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd32_run/pack.sh /work/main/.carry/bwd32)
# Wheel: D = 64's default loop with kPdsRunPtrs | kPdsLaneOnce (session 28's cfg 14, bf16 and fp16); cfg 13 = the
# loop without both (main's default loop), cfg 15 = the default + dQ split over the keys (kPdsDqSplitK).
# 1. time: cfg 0 / 13 / 15 / FA2 at B16 S8K / S4K D64 (batch first), B128 S1K D64 (heads first + tail), median of
#    7, interleaved
# 2. GPU tests: test_kernel_options.py and every D = 64 case of test_sm80_backward_gpu.py (the loop tests run
#    cfg 13 / 14 / 15 too; fp16 in the kernel-name / workspace / context tests), the running-pointer and dQ-split
#    tests first (40 tests; those the time left does not reach are not run)
LIM=49 NAME=bwd32 BASE=main32
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 13 15 --reps 7 --impls ours fa2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B128:S1024:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 1 )) tests/hstu/test_kernel_options.py \
    $T::test_sm80_backward_one_barrier_runs_its_kernel $T::test_sm80_backward_dq_split_keys \
    $T::test_sm80_backward_running_pointers $T::test_sm80_backward_dq_workspace_layouts \
    $T::test_sm80_backward_context_kernel $T::test_sm80_backward_one_barrier $T::test_sm80_backward_tail_blocks_first \
    $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_stsm_pds \
    -k "[64 or running_pointers or dq_split or not backward_ or key_block_limit"
digest "cfg 0 = the new default (running pointers + lane offsets once); 13 = main's loop; 15 = 0 + dQ split over keys"
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
