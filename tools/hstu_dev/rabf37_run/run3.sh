#!/bin/bash
# rabf37 (issue 39, session 34), run 3 (<= 52 s; the final wheel: main's objects + the branch's fwd bf16 D = 64 unit
# and hstu_ops.cc), from the root of main's tree:   OUT=/tmp/out_rabf37 timeout 56 bash .carry/rabf37/run3.sh
# The final code: the bf16 D = 64 forward with rab adds it by the tensor cores after S's MMAs (FwdSm80QregRabIlvMma);
# D = 128 / 256 keep the per-score add (runs 1-2: the MMAs 1.02-1.03x / 1.00x slower there). rab:9 =
# kernel_options(fwd_sm80_cfg=9): D = 64's per-score add (main's default).
# 1. GPU tests: test_sm80_forward_rab_smem, test_sm80_forward_qscale.
# 2. Time: bf16 B16 S4K H4 forward D = 64, two processes in opposite case orders; D = 128 / 256 causal and rab (main's
#    kernels) for the table.
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "rab_smem or qscale" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabf37 F64a 8 --reps 7 --dims 64 --dirs fwd --cases causal rab rab:9 rab1 rab1:9
bench /tmp/site_rabf37 F64b 8 --reps 7 --dims 64 --dirs fwd --cases rab1:9 rab1 rab:9 rab causal
bench /tmp/site_rabf37 F128 $(( $(left) )) --reps 5 --dims 128 256 --dirs fwd --cases causal rab rab:9
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'rab_smem or qscale')"
digest_tests
echo "#### time (the final wheel, sm90=False; ms (ratio to causal); rab = D64 rab by MMAs after S, D128 / D256 main's"
echo "#### per-score add; :9 = D64's per-score add (main's default); rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
