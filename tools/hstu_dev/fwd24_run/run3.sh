#!/bin/bash
# fwd24 (issue 39, session 22), run 3 (<= 30 s), from the root of main's tree (main 708f92a on the device):
#   OUT=/tmp/o_fwd24 timeout 60 bash .carry/fwd24/run3.sh > /tmp/o_fwd24/stdout.txt 2>&1
# The final wheel (run 2's, 5f63e73): causal against main in alternating processes (run 2's branch causal was
# 1.1-1.5 % behind main's own-process time; the Q-in-registers loop's SASS differs by 6 of ~1,530 instructions).
# 1. Tests (the branch's files in .carry/fwd24/tree): the kernel each cfg runs, the defaults' kernels and outputs
#    (long rows, contexts, targets). 2. Time: main22, fwd24, main22, fwd24 (each its own process): B16 S4K D64 / D128
#    causal, ctx64, tgt256 (the default).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 9 "runs_its_kernel or default_long_rows or default_contexts" -v -v $T
echo "== 2. time ($SECONDS s)"
for i in 1 2; do
  jagp /tmp/site_main main22 5 --reps 3 --dims 64 128 --ctx-cfgs 0
  jagp /tmp/site_fwd24 fwd24 5 --reps 3 --dims 64 128 --ctx-cfgs 0
done
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'runs_its_kernel or default_long_rows or default_contexts'; -v)"
digest_verbose
digest_time
