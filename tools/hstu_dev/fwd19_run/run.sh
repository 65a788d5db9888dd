#!/bin/bash
# fwd19 (issue 39, session 18), run 1 (<= 40 s), from the root of main's tree (main 6693e9b on the device):
#   OUT=/tmp/o_fwd19 timeout 60 bash .carry/fwd19/run.sh > /tmp/o_fwd19/stdout.txt 2>&1
# The split's work list packs consecutive short sequences into one query tile (windows), and its chunk is the mean
# work per block slot rounded to the nearest (was: up):
# 1. GPU tests (the branch's files in .carry/fwd19/tree): test_sm80_forward_gpu.py -k split (the split and the
#    packing against the fp32 reference, masks / rab / seqused / delta-q, packed vs not, chunks of 1; the kernels)
# 2. fwd19_jag.py: main18 cfg 0 against the branch's 0 (packed, nearest), 0::np (no packing), ceil (the old
#    rounding's chunk, packed), on the Zipf batch (two draws) and dense same-token batches at D = 256 / 128 / 64
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 9 "packs" tests/hstu/test_sm80_forward_gpu.py
run_tests 7 "split and not packs" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main18 8 --cfgs 0 --reps 7 --seeds 1 --prof
jag /tmp/site_fwd19 fwd19 12 --cfgs 0 0::np ceil --reps 7 --seeds 1 --prof
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k packs; -k 'split and not packs')"
digest_tests
echo "#### time (main18 = main 6693e9b's wheel, fwd19 = the branch's; sm90=False; 0 the default (fwd19: windows of"
echo "#### short sequences, chunk rounded to the nearest), 0::np no windows, ceil: chunks of the old rounding)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
