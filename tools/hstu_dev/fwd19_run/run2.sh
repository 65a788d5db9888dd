#!/bin/bash
# fwd19 (issue 39, session 18), run 2 (<= 40 s), from the root of main's tree (main 6693e9b on the device):
#   OUT=/tmp/o_fwd19 timeout 60 bash .carry/fwd19/run2.sh > /tmp/o_fwd19/stdout.txt 2>&1
# Run 1: the windows of short sequences and the nearest chunk were slower (removed); the Zipf batch's split kernel
# runs as long as the dense batch's, the difference is the list's kernel (13-15 us against 9). This wheel:
# 1. the list's kernel: the buckets' counts from a histogram of the walks' lengths (one pass over the tiles less),
#    the buckets' starts from a warp scan (was a 256-step loop of one thread);
# 2. fwd_sm80_cfg=4's new form: the warp skip in a copy of the body that only the tiles with context rows run;
# 3. fwd_split_tiles="wave" for the sm80 forward: the split's rule without its bound of two waves (run 1: the Zipf
#    draw of 9,292 tokens, over two waves, ran 1.15x faster with 12-tile chunks forced).
# Tests (the branch's files in .carry/fwd19/tree): test_sm80_forward_gpu.py -k split (the list: chunks of 1, 2, 3 and
# the rule against the fp32 reference, masks / rab / seqused / delta-q; the kernels), -k "candidates and context"
# at D = 64 / 128 (cfg 4's copy on tiles with contexts). Time: fwd19_jag.py, main18 against the branch, cfg 0 (and 4
# on B16 S4K causal / ctx64).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 10 "split" tests/hstu/test_sm80_forward_gpu.py
run_tests 5 "candidates and context and not gr and 128" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main18 8 --cfgs 0 4 --zipf-cfgs 0 --reps 5 --dims 256 64 --masks --prof
jag /tmp/site_fwd19 fwd19 13 --cfgs 0 4 --zipf-cfgs 0 0:w: --reps 5 --dims 256 64 --seeds 1 --masks --edge --prof
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k split, -k 'candidates and context and not gr and 128')"
digest_tests
echo "#### time (main18 = main 6693e9b's wheel, fwd19 = the branch's; sm90=False; 0 the default, 4 fwd_sm80_cfg=4 (main:"
echo "#### the warp skip's branch in every tile; fwd19: in a copy of the body for the tiles with context rows), 0:w:"
echo "#### fwd_split_tiles='wave' (fwd19: the split's rule at any number of waves))"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
