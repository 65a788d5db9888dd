#!/bin/bash
# fwd18 (issue 39, session 17), run 1 (<= 40 s), from the root of main's tree (main d901835 on the device):
#   OUT=/tmp/o_fwd18 timeout 60 bash .carry/fwd18/run.sh > /tmp/o_fwd18/stdout.txt 2>&1
# The sm80-class forward's split from a work list built on the device (only real (query tile, chunk) blocks,
# heaviest chunk first) and the rule's chunk halved, against main17's longest-first grid of the split:
# 1. GPU tests (the branch's test file in .carry/fwd18/tree): test_sm80_forward_gpu.py's split tests (chunks of 1, 2,
#    3 and the rule vs the fp32 reference, vs the default, bit for bit repeated, masks / rab / seqused / delta-q; the
#    kernel that runs; the list's kernel, and no split past the list's bound)
# 2. fwd17_jag.py: main17 cfg 0 / 0:6 / 0:12 / 7 against the branch's 0 (list, halved rule), 0:0 (no split), 0:n
#    (list, chunks of n), 7 (D = 128 split), on the Zipf batch and dense same-token batches at D = 256 / 128 / 64
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 15 "split" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main17 10 --cfgs 0 0:6 0:12 7 --reps 7 --d64
jag /tmp/site_fwd18 fwd18 12 --cfgs 0 0:0 0:4 0:6 0:8 0:12 7 --reps 7 --d64
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split)"
digest_tests
echo "#### time (main17 = main d901835's wheel, fwd18 = the branch's; sm90=False; cfg 0 the default (the split at D 64 /"
echo "#### 256 where the rule splits: main the longest-first grid, fwd18 the work list and the halved chunk), 0:0 no"
echo "#### split, 0:n chunks of at most n KV tiles, 7 the split at D = 128 too)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
