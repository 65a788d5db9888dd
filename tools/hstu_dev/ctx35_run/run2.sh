#!/bin/bash
# ctx35 (issue 39, session 32), run 2 (<= 50 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_ctx35 timeout 56 bash .carry/ctx35/run2.sh
# The branch: the portable backward's sm_90+ loops (D = 64: 128-query tiles on mbarriers; D = 128: three stages, one
# barrier; D = 256: mbarriers + split S / dP) for calls with contexts (hstu_bwd_pds_body_ctx_kernel: the context gap
# skipped by the walk's tile index); bwd_sm80_cfg=5 = main's context kernel (two stages, the plain body).
# 1. GPU tests (the branch's test file): the context kernels' names, the new loops against the fp32 reference and
#    cfg 5, the kernel each cfg runs; test_kernels_gpu.py's sm80 backward with long contexts (main's file).
# 2. Time (two processes, the cases in both orders): bf16 B16 S4K H4 backward at D = 128 / 64 / 256: causal, ctx64,
#    ctx64:5 (main's), tgt256, ctx64tgt256, ctx64tgt256:5.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "context_kernel or context_loops or runs_its_kernel" tests/hstu/test_sm80_backward_gpu.py
(cd $R && PYTHONPATH=/tmp/site_$NAME timeout 6 $PT tests/hstu/test_kernels_gpu.py \
    -k "sm80_backward_with_long_contexts and (64 or 128)" >> $OUT/tests.log 2>&1; echo "rc $? ($SECONDS s)")
echo "== 2. time ($SECONDS s)"
BW="causal ctx64 ctx64:5 tgt256 ctx64tgt256 ctx64tgt256:5"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
bench /tmp/site_ctx35 B1 $(( $(left) / 2 )) --reps 5 --dims 128 64 256 --dirs bwd --cases $BW
bench /tmp/site_ctx35 B2 $(left) --reps 5 --dims 128 64 256 --dirs bwd --cases $(rev $BW)
smi_stop
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
smi_digest
echo "#### tests (test_sm80_backward_gpu.py -k 'context_kernel or context_loops or runs_its_kernel'; then"
echo "#### test_kernels_gpu.py -k 'sm80_backward_with_long_contexts and (64 or 128)')"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -14 | cut -c1-300
echo "#### time (the branch's wheel, sm90=False; backward ms (ratio to causal); :5 = bwd_sm80_cfg=5: main's context"
echo "#### kernel)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-330
