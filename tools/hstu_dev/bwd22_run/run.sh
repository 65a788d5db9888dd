#!/bin/bash
# bwd22 (issue 39, session 21), run 1 (<= 43 s), from the root of main's tree:
#   OUT=/tmp/o_bwd22 timeout 60 bash .carry/bwd22/run.sh > /tmp/o_bwd22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd22_run/pack.sh /work/main/.carry/bwd22)
# Wheel: the default grid order heads first up to 2,048 keys at D = 64 / 128 / 256 (bwd21's kernels, without its dQ
# convert); cfg 3 the other order (= main's kernels at S1K); cfg 6 the convert by 16-byte lane slots with its fault
# fixed (tiles past a short sequence's end skipped); cfg 7 (bf16) heads first, each sequence's dQ of a head converted
# by its last key block (kPdsConvertBehind; the convert pass only zeroes the rows outside every sequence).
# 1. GPU tests: the WHOLE test_sm80_backward_gpu.py in one process (where bwd21's fault showed; its dq-layout test
#    runs cfg 0 / 6 / 7 / 8), and test_kernels_gpu's two kernel-name tests of the D = 256 rule
# 2. time: cfg 0 / 3 / 6 / 7, FA2, the peer (interleaved rounds); main21's wheel (cfg 0) in its own process
# 3. memcheck (caching allocator off) of the dq-layout test's failing case, with the time left
LIM=43
source "$(dirname "$0")/setup.sh"
SHAPES=(B128:S1024:D128 B128:S1024:D256 B16:S4096:D256 B128:S1024:D64)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 25 $TF $TK::test_sm80_d256_backward_runs_the_layout_that_fits \
    $TK::test_sm80_backward_candidate_runs_its_kernel
echo "== 2. time ($SECONDS s)"
PYTHONPATH=$PP timeout 9 python3 -P $B21 time --label bwd22 --cfgs 0 3 6 7 --reps 5 --impls ours fa2 peer \
    --shapes "${SHAPES[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=$PM timeout $(( $(left) > 9 ? 6 : $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label main21 \
    --cfgs 0 --reps 5 --impls ours --shapes "${SHAPES[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. memcheck ($SECONDS s)"
memcheck_layouts $(( $(left) - 1 )) "128-local_target-2-True-True"
digest "cfg 0 the default = heads first up to 2,048 keys; cfg 3 the other order; cfg 6 convert by slots; \
cfg 7 heads first + convert behind; main21 = main's wheel, own process"
