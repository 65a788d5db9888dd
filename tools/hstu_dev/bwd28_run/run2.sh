#!/bin/bash
# bwd28 (issue 39, session 25), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd28 timeout 56 bash .carry/bwd28/run2.sh > /tmp/o_bwd28/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd28_run/pack.sh /work/main/.carry/bwd28)
# Wheel: run 1's (cfg 9, the persistent walk; the tail order's SM count from the launch) plus the timing-only cfgs
# 10 / 11 / 12 / 13 (bf16 D128, heads first: WRONG gradients): the default's loop without the dK / dV stores, without
# the K / V copies, without both, without both and the first two Q / dO tiles' copies.
# 1. GPU tests: cfg 9 at D = 128 (run 1 ran out of time there), the tail order (D = 64 / 256 defaults, their SM count
#    now from the launch), which kernel runs, the kernel-name tests
# 2. count: a key block's fixed cost a and a full pair's p (no-mask line) under cfg 0, 10, 11, 12, 13 (what the
#    stores, the K / V copies and the first Q / dO tiles' copies cost of a); causal B128 S1K under cfg 0 and 13
LIM=49
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 15 tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py -k "(persistent and 128 and \
causal) or tail_blocks_first or one_barrier_runs_its_kernel or runs_the_layout_that_fits or candidate_runs_its_kernel"
echo "== 2. count ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $C/count28.py --cfgs 0 10 11 12 13 \
    --causal 0 13 --iters 2 > $OUT/count.log 2>&1
echo "rc $? ($SECONDS s)"
echo "" > $OUT/time.log
digest "no time table in this run (run 1 timed cfg 9)"
