#!/bin/bash
# bwd31 (issue 39, session 28), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd31 timeout 56 bash .carry/bwd31/run2.sh > /tmp/o_bwd31/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd31_run/pack.sh /work/main/.carry/bwd31)
# Wheel: run 1's launcher + two private cfgs of D = 64's one-barrier loop (bf16, sm_90+, no contexts): 13 =
# running pointers for the next Q / dO copies and dQ's fragment block (kPdsRunPtrs), 14 = 13 + the phases' lane
# offsets formed once per key block (kPdsLaneOnce). cfg 0 = the default, main's kernels.
# 1. GPU tests: cfg 13 / 14 against the fp32 reference and bitwise (dK, dV, drab) against the default, both grid
#    orders, causal / local + targets + rab + delta-q; which kernel runs at D = 64; test_kernel_options.py
# 2. time: cfg 0 / 13 / 14 / FA2, B16 S8K / S4K D64, B16 S4K D128 and B128 S1K D128 (cfg 13 / 14 run the default
#    there), median of 7, interleaved
# 3. ncu source counters, B2 S8K D64, cfg 0 / 14: instructions per warp and (64 x 128) tile pair (run 1's count of
#    the default did not reach its kernel in the time left)
LIM=49 NAME=bwd31 MAIN=main31
source "$(dirname "$0")/setup15.sh"  # bwd15's setup (OUT, R, C, left, both wheels, GPU, gpu_tests, ncu_sources)
T=tests/hstu/test_sm80_backward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 16 $T::test_sm80_backward_running_pointers $T::test_sm80_backward_one_barrier_runs_its_kernel \
    tests/hstu/test_kernel_options.py -k "running_pointers or kernel[64 or options"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $C/bwd21.py time --label $NAME --cfgs 0 13 14 --reps 7 \
    --impls ours fa2 --shapes B16:S8192:D64 B16:S4096:D64 B16:S4096:D128 B128:S1024:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
ncu_sources src31b 2 $C/prof17.py --batch 2 --runs 64:8192:0 64:8192:c14
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
grep -E "passed|failed|FAILED|ERROR" $OUT/tests.log | tail -6 | cut -c1-250
echo "#### time (ms; cfg 0 = the default (main's kernels); 13 = running pointers; 14 = 13 + lane offsets once)"
cut -c1-250 $OUT/time.log
echo "#### ncu (B2 S8K D64: cfg 0 / 14; per warp and (64 x 128) pair)"
ncu_summary
grep -E "registers" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "^###|^\| (MMA|ldmatrix|FP32|int|uniform|moves|control|cp.async|reductions)|^opcodes" $OUT/src_parts.md \
    2>/dev/null | cut -c1-300
