#!/bin/bash
# d256f37 (issue 39, session 34), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/d256f37/run2.sh > <dir>/stdout.txt 2>&1
# Run 1 (the lead's call 1): g1 (fwd_sm80_cfg=13: group copies + group / pair barriers + P by parity, 113 KB) 1.041x
# / 1.043x / 1.008x / 1.012x the default's time at B16 S4K / S8K, B256 S256, B64 S1K; g3 (14, + spread) 1.043x; g2
# (spread copies behind the block's barriers) 1.040x; bitwise; ncu S4K g1: barrier 0.20 -> 0.41, mio throttle 0.21 ->
# 0.41, math pipe throttle 0.26 -> 0.44 per issue. What is common to all three: the group copy layout and (g1, g3)
# 113 KB per block. This run separates them:
#   c4 = 13 with fwd_sm80_interleave=False (FwdSm80PairsGrp<4>: the group copies alone, the block's barriers, 105 KB)
#   s8 = 14 with fwd_sm80_interleave=False (FwdSm80PairsGrp<8>: the default's body in 113 KB per block)
# 1. GPU tests: test_sm80_forward_pairs_grp (now with c4 and s8).
# 2. Time in one process (5 rounds, default last in each round): s8, c4, g1, default, FA2 and NVIDIA's Ampere HSTU
#    (the carried module) at B16 S4K / S8K, B256 S256 D256.
# 3. ncu (one launch each): default, c4, s8 at B16 S4K.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 12 "pairs_grp" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_d256f37 d256f37 15 --reps 5 --variants s8 c4 g1 default --fa2 --peer --peer-dir $C/peer \
  --cases s4k256 s8k256 b256
echo "== 3. ncu ($SECONDS s)"
ncu36 n4k /tmp/site_d256f37 3 "hstu_fwd_xpf" --cases s4k256 --variants default c4 s8
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (default = main's hstu_fwd_xpf_kernel; g1 = fwd_sm80_cfg=13; c4 = 13 noilv; s8 = 14 noilv; peer)"
grep -E "^\| |rror|Traceback|capture|^rc|bitwise|peer" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-200
echo "#### ncu B16 S4K D256 (default, c4, s8)"
ncu_grep n4k
