#!/bin/bash
# fwd17 (issue 39, session 16), run 1 (<= 50 s), from the root of main's tree (main d8b2e85 on the device):
#   OUT=/tmp/o_fwd17 timeout 75 bash .carry/fwd17/run.sh > /tmp/o_fwd17/stdout.txt 2>&1
# The portable forward's jagged Zipf batch (D256 ctx3) against dense same-token batches; the split of long KV ranges
# (kernel_options(sm90=False, fwd_sm80_cfg=7), hstu_fwd_sm80_split.h) against main16's wheel:
# 1. GPU tests (the branch's files in .carry/fwd17/tree): test_sm80_forward_gpu.py's split tests (chunks of 1, 2, 3
#    and the rule vs the fp32 reference, vs the default, bit for bit repeated; the kernel that runs)
# 2. fwd17_jag.py: main16 cfg 0 (the Zipf batch, its parts, dense same tokens, D128; B256 S256 / B64 S1K vs FA2);
#    the branch cfg 0 / 7 (rule) / 7 with chunks of 4, 6, 8, 12
# 3. ncu (main16, one launch each): Zipf D256 ctx3, dense B2 S1820 ctx3, B16 S4K causal, ctx64, B256 S256; FA2 B256
#    S256: time, grid, SM active cycles avg / max / min over elapsed (the balance), instructions
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 16 "split" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd17_main main16 9 --cfgs 0 --reps 7 --parts --short --fa2
jag /tmp/site_fwd17 fwd17 9 --cfgs 0 7 7:4 7:6 7:8 7:12 --reps 7
echo "== 3. ncu ($SECONDS s)"
ncu_run /tmp/site_fwd17_main prof17 0
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests
echo "#### time (main16 = main d8b2e85's wheel, fwd17 = the branch's; sm90=False; cfg 0 the default (D256: warp"
echo "#### pairs), 7 the split (rule), 7:n chunks of at most n KV tiles)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (main16: Zipf D256 ctx3, dense B2 S1820 ctx3, B16 S4K causal, ctx64, B256 S256, FA2 B256 S256)"
tail -2 $OUT/ncu.log | cut -c1-300; cut -c1-400 $OUT/ncu_digest.md 2>/dev/null | head -20
