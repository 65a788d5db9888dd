#!/bin/bash
# d256f37 (issue 39, session 34), run 3 (<= 48 s; the last), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/d256f37/run3.sh > <dir>/stdout.txt 2>&1
# Runs 1-2 (the lead's calls 1-2): every variant with the group copy layout ~4-6 % slower (g1 1.041x, g3 1.043x, g2
# 1.040x at B16 S4K; ncu: the group copies alone behind the block's barriers, c4, 1.061x with mio throttle 0.21 ->
# 0.52; the default's body in 113 KB, s8, 0.989x). This run: the copies in the default's own mapping (a whole row per
# warp and pass) with the cheap addresses (two smem bases + immediates), m16 = 13 with fwd_sm80_interleave=False
# (FwdSm80PairsGrp<16>: one run after each barrier), m18 = 14 with it (<18>: spread over the MMA steps); g1 = 13.
# 1. GPU tests: test_sm80_forward_pairs_grp (g1, g3, m16, m18: error rule, bitwise the default, kernel names).
# 2. Time in one process (5 rounds): default, m16, m18, g1, FA2 and NVIDIA's Ampere HSTU (the carried module) at
#    B16 S4K / S8K, B256 S256 D256: ours / FA2, ours / peer and peer / FA2 from one process.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 15 "pairs_grp" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_d256f37 d256f37 $(( 50 - SECONDS )) --reps 5 --variants default m16 m18 g1 --fa2 --peer \
  --peer-dir $C/peer --cases s4k256 b256 s8k256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (default = main's hstu_fwd_xpf_kernel; m16 = 13 noilv; m18 = 14 noilv; g1 = 13; peer = NVIDIA Ampere)"
grep -E "^\| |rror|Traceback|capture|^rc|bitwise|peer" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-200
