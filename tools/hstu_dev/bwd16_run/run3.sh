#!/bin/bash
# bwd16 (issue 39, session 15), run 3 (<= 40 s; confirms the final commit's default), from the root of main's tree:
#   OUT=/tmp/o_bwd16 timeout 75 bash .carry/bwd16/run3.sh > /tmp/o_bwd16/stdout.txt 2>&1
# (carry: as run.sh). D = 128's default body is now kPdsLoopFree (runs 1 / 2's cfg 10, the fastest in both: 0.8-1.1 %
# ahead of run 2's default kPdsLoopFreeDp, which is cfg 10 now); 12 kPdsLoopFreeStores (kPdsLoopFree with
# kPdsLoopFreeDp's four P / dS store addresses, dP by 4; opt-in), 13 main's default body.
# 1. GPU tests: the default path (default_path_tests in bwd15_run/setup.sh: grid / phase order with the cfgs bitwise,
#    which kernel runs, the context kernel, the key-block limit, sm80 vs the reference at D = 128, the FA2 layout vs
#    the old default)
# 2. time80.py: branch cfg 0 / 12 / 13 + FA2, main15's wheel cfg 0 (causal B16 S4K / S16K, B128 S1K D128)
NAME=bwd16 MAIN=main15 LIM=38
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, wheels, GPU, T80, TF, TK, functions)
echo "== 1. GPU tests ($SECONDS s)"
default_path_tests 16
echo "== 2. time80 ($SECONDS s)"
time_vs_main 10 8 0 12 13
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd16 final: cfg 0 the default (D128: kPdsLoopFree); 12: kPdsLoopFreeStores; 13: main's D128 body (FA2 order)"
