#!/bin/bash
# fwd20 (issue 39, session 19), run 1 (<= 40 s), from the root of main's tree (main 939d473 on the device):
#   OUT=/tmp/o_fwd20 timeout 60 bash .carry/fwd20/run.sh > /tmp/o_fwd20/stdout.txt 2>&1
# 1. the context body (fwd_sm80_cfg=4, SKIP 5's copy with the warp skip) spill-free in sm_80 code: the warp's key
#    bound and full sub-tiles read from shared memory where used; the default for bf16 calls with contexts wherever
#    the default ran 1 / 2 (D = 64 / 128 long rows, D = 256 the pairs);
# 2. the split's partials bounded by 2 x the block slots (the list's kernel hands each split tile k consecutive ones)
#    instead of one per query tile slot, head and chunk of the longest walk;
# 3. candidates 3 and 5 removed.
# Tests (the branch's files in .carry/fwd20/tree): test_sm80_forward_gpu.py -k "default_contexts or workspace" (the
# new default with contexts against cfg 1 / 2 and the fp32 reference; the partials' bound), -k "split and not
# over_two" (chunks of 1, 2, 3 and the rule with masks / rab / seqused / delta-q), -k "candidates and context".
# Time: fwd20_bench.py, main19 against the branch (default, the default's tile forced, FA2).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 7 "default_contexts or workspace" tests/hstu/test_sm80_forward_gpu.py
run_tests 8 "split and not over_two and not workspace" tests/hstu/test_sm80_forward_gpu.py
run_tests 4 "candidates and context and not gr" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main19 7 --reps 5
jag /tmp/site_fwd20 fwd20 $((38 - SECONDS)) --reps 5 --base --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'default_contexts or workspace'; -k 'split and not over_two and not"
echo "#### workspace'; -k 'candidates and context and not gr')"
digest_tests
echo "#### time (main19 = main 939d473's wheel, fwd20 = the branch's; sm90=False; default; base: the default's tile"
echo "#### forced (fwd_sm80_cfg 1 at D = 64 / 256, 2 at D = 128: no context skip); FA2: torch's flash SDPA)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
