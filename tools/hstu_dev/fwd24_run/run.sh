#!/bin/bash
# fwd24 (issue 39, session 22), run 1 (<= 40 s), from the root of main's tree (main 708f92a on the device):
#   OUT=/tmp/o_fwd24 timeout 60 bash .carry/fwd24/run.sh > /tmp/o_fwd24/stdout.txt 2>&1
# The branch: fwd_sm80_cfg=5 at D = 64 / 128 (candidate 3's tile, Q in registers, with SKIP 4: the warp skip in
# query tiles with context rows; hstu_fwd_qreg_kernel); calls with contexts run candidate 4 by default (no Q in
# registers). 1. Tests (the branch's files in .carry/fwd24/tree): every candidate incl. 5 against the fp32 reference
# and the default with contexts / targets at D = 64 / 128, the kernel each cfg runs, the defaults with contexts (cfg
# 5 beside them). 2. Time: main22's wheel (cfg 0), then the branch's: B16 S8K D64 (the default, the peer, FA2); B16
# S4K D64 / D128 causal, ctx64 with cfg 0 (4) / 3 / 5, tgt256.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 13 "(candidates and context and not gr and not 256) or runs_its_kernel or default_contexts" -v -v $T
echo "== 2. time ($SECONDS s)"
jagp /tmp/site_main main22 9 --reps 5 --s8k --dims 64 128 --ctx-cfgs 0
jagp /tmp/site_fwd24 fwd24 $(( $(left) - 1 )) --reps 5 --s8k --peer --fa2 --dims 64 128 --ctx-cfgs 0 3 5
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k '(candidates and context and not gr and not 256) or runs_its_kernel"
echo "#### or default_contexts'; -v: PASSED per test)"
digest_verbose
digest_time
