#!/bin/bash
# fwd18 (issue 39, session 17), run 2 (<= 40 s), from the root of main's tree (main d901835 on the device):
#   OUT=/tmp/o_fwd18 timeout 60 bash .carry/fwd18/run2.sh > /tmp/o_fwd18/stdout.txt 2>&1
# The split's second version: the list's kernel picks the chunk from the real walks (at least the halved host rule),
# the items carry their KV tile range; D = 128's default splits too (its split kernel keeps m0 / b in shared memory):
# 1. GPU tests (the branch's files in .carry/fwd18/tree): test_sm80_forward_gpu.py's split tests (the fp32 reference
#    with chunks of 1, 2, 3 and the rule, masks / rab / seqused / delta-q; the kernels that run, now the default at
#    D = 128 too; the list's bound); test_kernels_gpu.py's sm80-class forward on small batches (split by default at
#    every D now) against the reference, both families
# 2. fwd17_jag.py: main17 cfg 0 / 7 against the branch's 0 (list, device chunk), 0:0 (no split), 0:12, on the Zipf
#    batch and dense same-token batches at D = 256 / 128 / 64, and shapes near two waves (--edge)
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 9 "split" tests/hstu/test_sm80_forward_gpu.py
run_tests 11 "sm80_and_sm90 or both_families" tests/hstu/test_kernels_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main17 7 --cfgs 0 7 --reps 7 --d64 --edge
jag /tmp/site_fwd18 fwd18 10 --cfgs 0 0:0 0:12 --reps 7 --d64 --edge
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split; test_kernels_gpu.py -k 'sm80_and_sm90 or both_families')"
digest_tests
echo "#### time (main17 = main d901835's wheel, fwd18 = the branch's; sm90=False; cfg 0 the default (main: the split at"
echo "#### D 64 / 256 on the grid; fwd18: at every D from the work list, the device's chunk), 0:0 no split, 0:12 chunks"
echo "#### of at most 12 KV tiles, 7 the split at D = 128 too)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
