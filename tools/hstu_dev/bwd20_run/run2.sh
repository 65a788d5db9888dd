#!/bin/bash
# bwd20 (issue 39, session 19), run 2 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_bwd20 timeout 60 bash .carry/bwd20/run2.sh > /tmp/o_bwd20/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd20_run/pack.sh /work/main/.carry/bwd20)
# Run 1 (00c1433): one block barrier per tile pair (three Q / dO stages, two P / dS buffers) -2.5 to -5.2 % at D = 128,
# -3.1 / -3.2 % at D = 64; the other phase order lost. Now (wheel of this commit): the one-barrier loop is the default
# at D = 64 / 128 on sm_90+ without contexts (bf16 and fp16); cfg 1 the two-barrier kernels (main's default); cfg 2
# (bf16) the loop with the next tile's Q and dO copies issued apart; the removed comparison cfgs' code is gone, the
# D = 128 / 256 context kernels' phase order fixed by template (dQ-first at D = 128 too).
# 1. GPU tests: default / cfg 1 / cfg 2 vs the fp32 reference and bitwise, the FA2 layout vs the old default (bf16 /
#    fp16), sm80 vs the reference, long contexts, the context kernels, which kernel runs
# 2. time80.py: cfg 0 / 1 / 2 + FA2 at B16 S4K / S16K / B128 S1K D128, B16 S8K / S4K D64, B16 S4K ctx64 D128; main19's
#    wheel (cfg 0) in its own process
NAME=bwd20 MAIN=main19 LIM=42
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
T80=$C/time80.py
SH=(--only "causal B16 S4K D128" S16K S1K D64 ctx64)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 19 $TF::test_sm80_backward_one_barrier $TK::test_sm80_backward_fa2_layout_matches_the_old_default \
    $TK::test_sm80_and_sm90_kernels_agree_with_reference $TK::test_sm80_backward_with_long_contexts \
    $TF::test_sm80_backward_context_kernel $TF::test_sm80_backward_one_barrier_runs_its_kernel \
    -k "one_barrier[128-jagged or one_barrier[64-dense or old_default[64 or old_default[128 or reference[64 or reference[128 or (long_contexts and 128) or context_kernel or kernel[64 or kernel[128"
echo "== 2. time80 ($SECONDS s)"
time_cfgs 11 0 1 2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default (one barrier at D = 64 / 128); cfg 1: two barriers (main's kernels); cfg 2: split Q / dO copies; FA2; main19's default"
