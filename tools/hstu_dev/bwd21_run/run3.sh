#!/bin/bash
# bwd21 (issue 39, session 20), run 3 (<= 30 s, the final code), from the root of main's tree:
#   OUT=/tmp/o_bwd21 timeout 60 bash .carry/bwd21/run3.sh > /tmp/o_bwd21/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd21_run/pack.sh /work/main/.carry/bwd21)
# Run 2 (396da90): the convert by lane slots (default) 1.7295 ms at B128 S1K; cfg 3 (heads first) -1.5 % there (L2
# hits 34 -> 74 %), -0.1 / +0.2 / +0.1 / +0.2 / -0.3 % at S4K / S16K / D256 / S8K D64 / S4K D64; cfg 9 (early start)
# -0.2 % at S1K, +0.8 / +1.1 % at D64 (gone). Wheel of this commit: the default grid order heads first at D = 64 / 128
# up to 2,048 keys (else batch first); cfg 3 the other order.
# 1. GPU tests of the final code: cfg 0-3 vs the reference and bitwise (D 64 / 128 / 256), which kernel runs, the
#    default kernel and its candidates (test_kernels_gpu), the dQ workspace layouts
# 2. time: cfg 0 / 3 at B128 S1K D64 / D128 / D256 (the rule's other head dims, unmeasured before)
LIM=29
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 18 $TF::test_sm80_backward_one_barrier $TF::test_sm80_backward_one_barrier_runs_its_kernel \
    $TK::test_sm80_backward_candidate_runs_its_kernel $TF::test_sm80_backward_dq_workspace_layouts \
    -k "one_barrier[128-jagged-causal or one_barrier[64-dense-target or one_barrier[256-jagged-causal or runs_its_kernel[64 or runs_its_kernel[128 or runs_its_kernel[256 or candidate_runs_its_kernel[128 or layouts[128-causal"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=$PP timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $C/bwd21.py time --cfgs 0 3 --reps 5 \
    --impls ours fa2 --shapes B128:S1024:D128 B128:S1024:D64 B128:S1024:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "PASSED|FAILED|ERROR|passed|failed|rror" $OUT/tests.log | sed 's/.*:://' | cut -c1-120 | tail -14
cut -c1-250 $OUT/time.log
