#!/bin/bash
# ctx26 (issue 39, session 23), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/ctx26/run2.sh > <dir>/stdout.txt 2>&1
# The branch: the bf16 default with contexts at D = 64 / 128 (candidate 5's tile, SKIP 6) walks query tile 0's KV
# tiles that only its context rows see two per step (warps 0-1 tile nb, warps 2-3 tile nb - 1 for the rows of warps
# 0-1, both stages, unpipelined), and at D = 64 runs tile 0's body as a call (as D = 128); fwd_sm80_cfg=5 is main's
# default (one tile per step, D = 64's body inlined). ctx0 (a num_contexts of zeros: the context kernel, no extra
# tiles, no pairs) isolates the call: run 1 measured main's context kernel 2.8 % over causal at D = 64 with ctx0.
# 1. Tests (the branch's test file in .carry/ctx26/tree): the pairs (contexts 0-128, jagged, windows, targets, rab,
#    against the fp32 reference and cfg 5, bitwise repeat, the SKIP 6 kernel named), the defaults with contexts.
# 2. Time: main26, ctx26, main26, ctx26 (own processes, 3 rounds each): B16 S4K D64 / D128 causal, ctx0, ctx64 (the
#    branch: the default and cfg 5 beside it).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 17 "context_pairs or default_contexts" -v tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
for i in 1 2; do
  bench /tmp/site_main main26 $(( $(left) / (6 - 2 * i) )) --reps 3 --dims 64 128 --cases causal ctx0 ctx64
  bench /tmp/site_ctx26 ctx26 $(( $(left) / (5 - 2 * i) )) --reps 3 --dims 64 128 \
      --cases causal ctx0 ctx64 ctx0:5 ctx64:5
done
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'context_pairs or default_contexts'; -v)"
grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (main26 = main df4a8c3's wheel; ctx26 = the branch's; own processes main, ctx26, main, ctx26;"
echo "#### sm90=False; ctxN = N contexts, the default (ctx26: the pairs, D = 64 the call); :5 = fwd_sm80_cfg=5 (main's)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
