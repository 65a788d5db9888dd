#!/bin/bash
# ctx35 (issue 39, session 32), run 3 (<= 50 s; the branch's final wheel), from the root of main's tree:
#   OUT=/tmp/out_ctx35 timeout 56 bash .carry/ctx35/run3.sh
# The branch's final wheel: the portable backward's sm_90+ loops for calls with contexts (hstu_bwd_pds_body_ctx_kernel,
# the context gap skipped by the walk's tile index): D = 64 128-query tiles on mbarriers, D = 128 three stages, D = 256
# the mbarrier loop without the split S / dP (the split's context kernel spilled 56 B; ctx64:13 = bwd_sm80_cfg=13:
# the split); bwd_sm80_cfg=5 = main's context kernel (two stages, the plain body).
# 1. GPU tests (the branch's test file): the context kernels' names, the new loops against the fp32 reference and
#    cfg 5, the kernel each cfg runs; test_kernels_gpu.py's sm80 backward with long contexts (main's file).
# 2. Time: bf16 B16 S4K H4 backward, D = 128 / 64 (one process), D = 256 (another, the cases reversed, + ctx64:13):
#    causal, ctx64, ctx64:5 (main's), tgt256, ctx64tgt256, ctx64tgt256:5.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 16 "context_loops or context_kernel" -v tests/hstu/test_sm80_backward_gpu.py
(cd $R && PYTHONPATH=/tmp/site_$NAME timeout 5 $PT -v tests/hstu/test_kernels_gpu.py \
    -k "sm80_backward_with_long_contexts and (64 or 128)" >> $OUT/tests.log 2>&1; echo "rc $? ($SECONDS s)")
echo "== 2. time ($SECONDS s)"
BW="causal ctx64 ctx64:5 tgt256 ctx64tgt256 ctx64tgt256:5"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
bench /tmp/site_ctx35 B1 8 --reps 5 --dims 128 64 --dirs bwd --cases $BW
bench /tmp/site_ctx35 B2 8 --reps 5 --dims 256 --dirs bwd --cases ctx64:13 $(rev $BW)
echo "== 3. GPU tests ($SECONDS s)"
[ $(left) -gt 4 ] && run_tests $(( $(left) - 1 )) "runs_its_kernel" -v tests/hstu/test_sm80_backward_gpu.py
smi_stop
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
smi_digest
echo "#### tests (-v; test_sm80_backward_gpu.py -k 'context_loops or context_kernel', then test_kernels_gpu.py"
echo "#### -k 'sm80_backward_with_long_contexts and (64 or 128)', then test_sm80_backward_gpu.py -k runs_its_kernel)"
grep -E "PASSED|FAILED|ERROR" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.* (PASSED|FAILED|ERROR).*/\1 \2/' | sort | uniq -c
grep -E "^FAILED|^ERROR|[0-9]+ (passed|failed)|rror" $OUT/tests.log | tail -8 | cut -c1-300
echo "#### time (the branch's wheel, sm90=False; backward ms (ratio to causal); :5 = bwd_sm80_cfg=5: main's context"
echo "#### kernel; :13 at D = 256: the split S / dP loop with contexts)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-330
