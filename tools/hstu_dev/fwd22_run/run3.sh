#!/bin/bash
# fwd22 (issue 39, session 21), run 3 (<= 30 s), from the root of main's tree (main 95270e5 on the device):
#   OUT=/tmp/o_fwd22 timeout 60 bash .carry/fwd22/run3.sh > /tmp/o_fwd22/stdout.txt 2>&1
# The final wheel: run 2's (the bf16 default at D = 128 = candidate 3, Q in registers, where two of its blocks fit
# per SM) with fwd_sm80_cfg=5 (V early: no gain in run 2) removed.
# 1. Tests (the branch's files in .carry/fwd22/tree; one pytest, -v): every candidate at D = 64 / 128 / 256 with
#    every mask against the fp32 reference and the default (the GR convention too), the kernel each cfg runs, the
#    defaults' kernels and outputs at long rows and with contexts.
# 2. Time (the branch; main's wheel beside it in run 2): B16 S16K / S4K / B128 S1K D128 (the default, cfg 2 = the old
#    default), the peer.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 19 "candidates or runs_its_kernel or default_long_rows or default_contexts" -v -v $T
echo "== 2. time ($SECONDS s)"
jagp /tmp/site_fwd22 fwd22 $(( 29 - SECONDS )) --reps 5 --cases s16k128 s4k128 b128 --d128-cfgs 0 2 --peer
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'candidates or runs_its_kernel or default_long_rows or"
echo "#### default_contexts'; -v)"
digest_verbose
digest_time
