#!/bin/bash
# ctx36 (issue 39, session 33), run 2 (<= 52 s; the branch's final wheel), from the root of main's tree:
#   OUT=/tmp/out_ctx36 timeout 56 bash .carry/ctx36/run2.sh
# The final wheel (run 1's plus D = 256's backward with contexts in the split S / dP loop, kRealIdx).
# 1. GPU tests (the branch's test files): backward context loops at D = 64 / 128 / 256 (the error rule, cfg 5's
#    gradients, D = 64 dK / dV bitwise cfg 13's, D = 256 cfg 13's) and the context kernels' names; forward
#    context_xpf (D = 256) and context_pairs at D = 64; then runs_its_kernel if time is left.
# 2. Time B16 S4K H4 bf16 (one process per direction, cases interleaved): bwd causal / ctx64 / ctx64:13 (main's
#    default with contexts: D64 the loop with the context tile in full, D256 without the split; D128 = the default)
#    / ctx64:3 (the other grid order: heads first); fwd causal / ctx64 / ctx64noilv (main's D64) / ctx64:4 (main's
#    D256) / ctx0.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 19 "context_loops or context_kernel" tests/hstu/test_sm80_backward_gpu.py
run_tests 9 "context_xpf or (context_pairs and 64)" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_ctx36 B $(( $(left) < 9 ? $(left) : 9 )) --reps 5 --dims 64 128 256 --dirs bwd \
    --cases causal ctx64 ctx64:13 ctx64:3
bench /tmp/site_ctx36 F $(( $(left) < 7 ? $(left) : 7 )) --reps 5 --dims 64 256 --dirs fwd \
    --cases ctx0 ctx64:4 ctx64noilv ctx64 causal
[ $(left) -gt 6 ] && run_tests $(( $(left) - 1 )) "runs_its_kernel" tests/hstu/test_sm80_backward_gpu.py
smi_stop
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
smi_digest
echo "#### tests: bwd -k 'context_loops or context_kernel'; fwd -k 'context_xpf or (context_pairs and 64)'; bwd -k"
echo "#### runs_its_kernel (if time was left)"
grep -E "^FAILED|^ERROR|[0-9]+ (passed|failed)|rror|%\]" $OUT/tests.log | tail -12 | cut -c1-300
echo "#### time (branch wheel, sm90=False; ms (ratio to causal); bwd :13 main's D64 / D256 context loops, :3 other"
echo "#### grid order; fwd noilv / :4 main's D64 / D256 context kernels)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-330
