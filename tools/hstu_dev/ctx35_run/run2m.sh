#!/bin/bash
# ctx35 (issue 39, session 32), run 2m (<= 50 s; main35's wheel only), from the root of main's tree:
#   OUT=/tmp/out_ctx35 timeout 56 bash .carry/ctx35/run2m.sh
# The forward with contexts at D = 64 / 256 without rab in the rounds (run 1's D = 256 ratios moved 6 % with the
# cases' order next to the rab cases: the power cap's clock): what D = 64's context kernel lacks against the default
# without contexts (causalnoilv: without the interleaved groups; causalnoqs: without Q scaled by alpha / 2 either:
# candidate 3, the context kernel's body), ctx0 / ctx64 (the default: FwdSm80QregCtx), ctx64:5 (no pairs), tgt256,
# ctx64tgt256; the same cases at D = 256 (noilv / noqs: no-ops there; ctx64: candidate 4; :5 the early-Q pairs).
# Four processes, both orders twice.
source "$(dirname "$0")/setup.sh"
F="causal causalnoilv causalnoqs ctx0 ctx64 ctx64:5 tgt256 ctx64tgt256"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
echo "== time ($SECONDS s)"
for i in 1 2; do
  bench /tmp/site_main A$i $(( $(left) / (6 - 2 * i) )) --reps 5 --dims 64 256 --dirs fwd --cases $F
  bench /tmp/site_main R$i $(( $(left) / (5 - 2 * i) )) --reps 5 --dims 64 256 --dirs fwd --cases $(rev $F)
done
smi_stop
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
smi_digest
echo "#### time (main35's wheel, sm90=False; forward ms (ratio to causal); A = cases in the listed order, R reversed;"
echo "#### noilv / noqs: fwd_sm80_interleave=False / + fwd_sm80_qscale=False; :5 = fwd_sm80_cfg=5)"
grep -E "^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-330
