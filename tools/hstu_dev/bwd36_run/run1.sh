#!/bin/bash
# bwd36 (issue 39, session 33), run 1 (<= 50 s), from the root of main's tree:
#   OUT=/tmp/out_bwd36 timeout 56 bash .carry/bwd36/run1.sh
# (carry: bash tools/hstu_dev/bwd36_run/pack.sh /work/main/.carry/bwd36)
# Wheel: main's kernels + bwd_sm80_cfg=14 at D = 128 (bf16, sm_90+, no contexts): the default's one-barrier loop with
# the wholly masked phase-1 warp tiles skipped (kPdsDeadSkip) and the k-steps of phases 2 / 3 that would read them.
# 1. time: cfg 0 (main's path) / cfg 14 / FA2 (the product benchmark's call) at B128 S1K D128, B16 S16K D128, B16
#    S8K D64 (cfg 14 there: D = 64's lane-offset comparison, not this change), interleaved, L2 flushed, median of 7
# 2. torch.profiler: the kernels of one backward (cfg 0, cfg 14) at B128 S1K D128
# 3. GPU tests: test_sm80_backward_dead_skip, the D = 128 kernel names, the one-barrier loop test's D = 128 cases
LIM=50
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 16 python3 -P $T36 time --bench $R/benchmarks --cfgs 0 14 --reps 7 \
    --shapes B128:S1024:D128 B16:S16384:D128 B16:S8192:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 6 python3 -P $T36 prof --bench $R/benchmarks --cfgs 0 14 --no-fa2 \
    --shapes B128:S1024:D128 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 2 )) $T::test_sm80_backward_dead_skip \
    "$T::test_sm80_backward_one_barrier_runs_its_kernel[128]" $T::test_sm80_backward_one_barrier -k "dead or 128"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-220 | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log 2>/dev/null | sed 's/\[.*//' | sort | uniq -c
echo "#### time (ms; cfg 0 = main's path, 14 = the dead warp tiles skipped at D = 128)"
cut -c1-300 $OUT/time.log
echo "#### prof"
grep -E "^#### prof|^  " $OUT/prof.log | cut -c1-120 | head -12
