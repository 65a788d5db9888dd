#!/bin/bash
# bwd20 (issue 39, session 19), run 3 (<= 30 s), from the root of main's tree:
#   OUT=/tmp/o_bwd20 timeout 60 bash .carry/bwd20/run3.sh > /tmp/o_bwd20/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd20_run/pack.sh /work/main/.carry/bwd20)
# Run 2 (1b4a2b8): the one-barrier default -2.4 to -5.5 % against the two-barrier kernels (cfg 1) in the same process;
# the split Q / dO copies (cfg 2) -0.7 / -0.8 % at D = 64, +0.2 to +1.2 % at D = 128; 46 GPU tests passed. Now (wheel
# of this commit, the final code): D = 64's one-barrier default issues the next tile's Q and dO copies apart; cfg 2 at
# D = 64 runs them together (the comparison); D = 128 as in run 2.
# 1. GPU tests: the whole of test_sm80_backward_gpu.py, then the D = 64 default in test_kernels_gpu.py (vs the
#    reference, vs the old layout in bf16 / fp16, long contexts)
# 2. time80.py: cfg 0 / 1 / 2 + FA2 at B16 S8K / S4K D64; main19's wheel (cfg 0) in its own process
NAME=bwd20 MAIN=main19 LIM=29
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
T80=$C/time80.py
SH=(--only D64)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 16 $TF $TK::test_sm80_and_sm90_kernels_agree_with_reference \
    $TK::test_sm80_backward_fa2_layout_matches_the_old_default $TK::test_sm80_backward_with_long_contexts \
    -k "sm80_backward_gpu or reference[64 or old_default[64 or (long_contexts and 64)"
echo "== 2. time80 ($SECONDS s)"
time_cfgs 6 0 1 2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default (D = 64: one barrier, split copies); cfg 1: two barriers; cfg 2: one barrier, copies together; FA2; main19's default"
