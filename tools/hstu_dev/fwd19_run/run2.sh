#!/bin/bash
# fwd19 (issue 39, session 18), run 2 (<= 40 s), from the root of main's tree (main 6693e9b on the device):
#   OUT=/tmp/o_fwd19 timeout 60 bash .carry/fwd19/run2.sh > /tmp/o_fwd19/stdout.txt 2>&1
# The final candidate's wheel: the split's windows of short sequences and the nearest chunk (run 1), and
# fwd_sm80_cfg=4's new form: the warp skip in a copy of the body that only the tiles with context rows run
# 1. GPU tests (the branch's files in .carry/fwd19/tree): test_sm80_forward_gpu.py -k "packs or split" (the split
#    and the windows), -k "candidates and context" (cfg 4's copy on tiles with contexts, against the reference);
#    test_kernels_gpu.py -k "sm80_and_sm90 or both_families" (the sm80-class forward on small batches, split and
#    packed by default, against the reference, both families)
# 2. fwd19_jag.py: main18 against the branch on the Zipf batch / dense same tokens (default), and B16 S4K ctx64 vs
#    causal at D = 128 / 64 with cfg 0 and 4
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 7 "packs or split" tests/hstu/test_sm80_forward_gpu.py
run_tests 6 "candidates and context and not gr" tests/hstu/test_sm80_forward_gpu.py
run_tests 8 "sm80_and_sm90 or both_families" tests/hstu/test_kernels_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main18 6 --cfgs 0 4 --reps 7 --masks
jag /tmp/site_fwd19 fwd19 8 --cfgs 0 4 --reps 7 --masks
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'packs or split', -k 'candidates and context and not gr';"
echo "#### test_kernels_gpu.py -k 'sm80_and_sm90 or both_families')"
digest_tests
echo "#### time (main18 = main 6693e9b's wheel, fwd19 = the branch's; sm90=False; 0 the default, 4 fwd_sm80_cfg=4 (main:"
echo "#### the warp skip's branch in every tile; fwd19: in a copy of the body for the tiles with context rows))"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
