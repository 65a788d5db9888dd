#!/bin/bash
# ctx36 (issue 39, session 33), run 1 (<= 52 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_ctx36 timeout 56 bash .carry/ctx36/run1.sh
# The branch: forward with contexts, the tiles without context rows in the defaults' bodies (D = 64: Q scaled,
# interleaved 16-key groups, hstu_fwd_qreg_ctx_ilv_kernel; D = 256: the pairs' prefetched xadd body,
# hstu_fwd_ctx_xpf_kernel); backward D = 64 with contexts: the last context tile's masked second half skipped; D = 256
# with contexts: the split S / dP loop's context twin by the tile's own index (main's: the loop without the split).
# Main's paths in the same process: fwd D64 ctx*noilv (fwd_sm80_interleave=False), fwd D256 ctx*:4
# (fwd_sm80_cfg=4), bwd ctx64:13 (bwd_sm80_cfg=13: D64 the context loop with the tile in full, D256 without the split).
# 1. GPU tests (the branch's test files): forward context tests, backward context loops / kernel names.
# 2. Time B16 S4K H4 bf16: fwd D64 / D256 (one process, then the cases reversed in another); bwd D64 / D128 / D256
#    (causal, ctx64, ctx64:13, and :3 = the other grid order: heads first at S4K, item (b) at D128).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 12 "context_pairs or context_xpf or contexts_run_candidate_4" -v tests/hstu/test_sm80_forward_gpu.py
run_tests 13 "context_loops and (64 or 256)" -v tests/hstu/test_sm80_backward_gpu.py
echo "== 2. time ($SECONDS s)"
F="causal ctx64 ctx64noilv ctx64:4 ctx0 ctx0noilv ctx0:4"
BW="causal ctx64 ctx64:13 causal:3 ctx64:3"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
bench /tmp/site_ctx36 F1 $(( $(left) < 8 ? $(left) : 8 )) --reps 5 --dims 64 256 --dirs fwd --cases $F
bench /tmp/site_ctx36 B1 $(( $(left) < 9 ? $(left) : 9 )) --reps 5 --dims 64 128 256 --dirs bwd --cases $BW
[ $(left) -gt 7 ] && bench /tmp/site_ctx36 F2 $(( $(left) - 1 )) --reps 5 --dims 64 256 --dirs fwd --cases $(rev $F)
smi_stop
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
smi_digest
echo "#### tests (-v; fwd -k 'context_pairs or context_xpf or contexts_run_candidate_4', bwd -k 'context_loops and"
echo "#### (64 or 256)')"
test_digest
echo "#### time (branch wheel, sm90=False; ms (ratio to causal); fwd noilv / :4 = main's D64 / D256 context kernels;"
echo "#### bwd :13 = main's D64 context loop, :3 = the other grid order)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-330
