#!/bin/bash
# fwd17 (issue 39, session 16), run 2 (<= 50 s), from the root of main's tree (main d8b2e85 on the device):
#   OUT=/tmp/o_fwd17 timeout 75 bash .carry/fwd17/run2.sh > /tmp/o_fwd17/stdout.txt 2>&1
# The split of long KV ranges as the bf16 default at D = 64 / 256 (opt-in fwd_sm80_cfg=7 at D = 128), its partials'
# sum now chunk by chunk with 8 loads in flight (run 1's sum waited one L2 latency per chunk and element):
# 1. GPU tests (the branch's test files in .carry/fwd17/tree): test_sm80_forward_gpu.py's split tests, the kernel
#    each cfg and the default run (without the split), the default's long-row rule
# 2. fwd17_jag.py (CUDA graphs of 10 calls: run 1's loops were host-bound at ~77 us per call): main16 cfg 0 against
#    the branch's default (0: the rule's split), without the split (0:0), chunks of 4 / 6 / 8 / 12 (0:n), cfg 7 (the
#    split at D = 128 too), on the Zipf batch and dense same-token batches at D = 256 / 128 / 64, shapes the rule does
#    not split, B256 S256 / B64 S1K vs FA2
# 3. GPU tests of test_kernels_gpu.py that run the sm80-class forward (against the reference, both families, target
#    gaps, the GR convention, long contexts), with the time left
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 22 "split or candidate_runs_its_kernel or long_rows" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd17_main main16 7 --cfgs 0 --reps 7 --d64 --long --short
jag /tmp/site_fwd17 fwd17 12 --cfgs 0 0:0 0:4 0:6 0:8 0:12 7 --reps 7 --d64 --long --short --fa2
echo "== 3. GPU tests, the sm80-class forward in test_kernels_gpu.py (the default's split on its small batches) ($SECONDS s)"
run_tests $((56 - SECONDS)) "sm80_and_sm90 or both_families or (sm80 and long_contexts)" tests/hstu/test_kernels_gpu.py
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests
echo "#### time (main16 = main d8b2e85's wheel, fwd17 = the branch's; sm90=False; cfg 0 the default (split at D 64 /"
echo "#### 256 where the rule splits), 0:0 without the split, 0:n chunks of at most n KV tiles, 7 the split at every D)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
