#!/bin/bash
# ctx26 (issue 39, session 23), run 3 (<= 48 s; the same wheel as run 2), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/ctx26/run3.sh > <dir>/stdout.txt 2>&1
# 1. test_sm80_forward_gpu.py's tests that compare the candidates with the default (which with contexts now runs
#    the pairs) and the kernel each cfg runs: the candidates with masks / delta-q / rab / seqused, the GR convention.
# 2. Time, one branch process with the cases in the other order (run 2 allocated causal first, cfg 5 last; ratios
#    of identical kernels moved 1-2 % between processes): ctx64:5, ctx64, ctx0:5, ctx0, causal.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 32 "candidates or runs_its_kernel" -v tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_ctx26 ctx26 $(left) --reps 3 --dims 128 64 --cases ctx64:5 ctx64 ctx0:5 ctx0 causal
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'candidates or runs_its_kernel'; -v)"
grep -E "PASSED|FAILED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*(PASSED|FAILED).*/\1 \2/' | sort | uniq -c
digest_tests
echo "#### time (ctx26 = the branch's wheel; sm90=False; ctxN = N contexts, the default; :5 = fwd_sm80_cfg=5)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
