#!/bin/bash
# fwd25 (issue 39, session 22), run 1 (<= 35 s), from the root of main's tree (main 37b3e7d on the device):
#   OUT=/tmp/o_fwd25 timeout 60 bash .carry/fwd25/run.sh > /tmp/o_fwd25/stdout.txt 2>&1
# The branch: the bf16 default with contexts at D = 64 / 128 runs candidate 5's tile with SKIP 7: query tile 0's warps
# 2-3 (rows that stop at the diagonal) compute the odd sub-tiles of the context rows' history walk (their fp32 partial
# through the tile's output rows), warps 0-1 the even ones; fwd_sm80_cfg=5 is main's default (no helpers).
# 1. Tests (the branch's files in .carry/fwd25/tree): the helpers (64 / 0 / 1 / 31 / 32 / 65 / 100 contexts, windows,
#    targets, rab) against the fp32 reference and cfg 5, bitwise repeat; the defaults with contexts.
# 2. Time: main22b, fwd25, main22b, fwd25 (own processes): B16 S4K D64 / D128 causal, ctx64 (fwd25: cfg 0 and 5),
#    tgt256.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 16 "context_helpers or default_contexts" -v -v $T
echo "== 2. time ($SECONDS s)"
for i in 1 2; do
  jagp /tmp/site_main main22b 5 --reps 3 --dims 64 128 --ctx-cfgs 0
  jagp /tmp/site_fwd25 fwd25 $(( i == 1 ? 6 : $(left) - 1 )) --reps 3 --dims 64 128 --ctx-cfgs 0 5
done
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'context_helpers or default_contexts'; -v)"
digest_verbose
digest_time
