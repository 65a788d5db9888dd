#!/bin/bash
# bwd28 (issue 39, session 25), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd28 timeout 56 bash .carry/bwd28/run1.sh > /tmp/o_bwd28/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd28_run/pack.sh /work/main/.carry/bwd28)
# Wheel: cfg 9 (bf16, D = 64 / 128, sm_90+): the one-barrier loop with one CTA per SM walking the key blocks
# (kPdsPersistent), the next block's V / first Q / dO copies under the last tile, its K under the dK / dV stores;
# the default kernels as main's (the tail order's SM count now from the launch).
# 1. GPU tests: cfg 9 against the fp32 reference and bitwise against the default (120 jagged sequences), which
#    kernel runs, the one-barrier loop tests at D = 64 / 128 (cfg 9 among the cfgs), the kernel-name tests
# 2. time: cfg 0 / 9 / FA2 at B128 S1K D128, D64, B16 S4K D128 (interleaved rounds, median of 5)
# 3. count: a key block's fixed cost a and a full pair's p (no-mask line) under cfg 0 and 9
LIM=49
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 17 tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py -k "persistent or \
one_barrier_runs_its_kernel or (test_sm80_backward_one_barrier and (64 or 128) and (causal or none)) or \
runs_the_layout_that_fits or candidate_runs_its_kernel"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $B21 time --label $NAME --cfgs 0 9 --reps 5 --impls ours fa2 \
    --shapes B128:S1024:D128 B128:S1024:D64 B16:S4096:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. count ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $C/count28.py --cfgs 0 9 \
    --iters 2 > $OUT/count.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the default (main's kernels); cfg 9 = one CTA per SM walking the key blocks"
