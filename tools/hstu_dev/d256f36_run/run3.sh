#!/bin/bash
# d256f36 (issue 39, session 33), run 3 (<= 48 s; the wheel with fwd_sm80_bm64=2), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/d256f36/run3.sh > <dir>/stdout.txt 2>&1
# Run 1 (the lead's call 4): wide (fwd_sm80_bm64=1: 128 x 64 tiles of 8 warps, K / V double-buffered, one block per
# SM) 1.115x / 1.130x / 1.161x / 1.156x / 1.269x the default's time at B16 S4K / S8K, B128 / B64 S1K, B256 S256 D256,
# bitwise equal; ncu S4K: L2 bytes 9.38 -> 5.08 GB, long scoreboard 0.65 -> 0.33, but short scoreboard 0.88 -> 1.56,
# mio throttle 0.21 -> 0.55, math pipe throttle 0.26 -> 0.86, barrier 0.20 -> 0.39: the 8 warps of one block in
# lockstep. Run 3's wheel adds shift (fwd_sm80_bm64=2, FwdSm80PairsWideShift): the second half's P V one step late,
# so each SM sub-partition's two warps are half a step apart.
# 1. GPU tests: pairs_wide (default, wide, shift: error rule, bit for bit, kernel names) and the D = 256 default's
#    kernel-name / long-row tests.
# 2. Time in one process (5 rounds): default, wide, shift, FA2 at B16 S4K / S8K, B256 S256 D256.
# 3. ncu (pipes, warp states, L2 bytes; one launch each): default and shift at B16 S4K.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 14 "pairs_wide or (256 and (long_rows or candidate_runs_its_kernel))" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_d256f36 d256f36 14 --reps 5 --variants default wide shift --fa2 --cases s4k256 s8k256 b256
echo "== 3. ncu ($SECONDS s)"
ncu36 n4s /tmp/site_d256f36 3 "hstu_fwd_xpf" --cases s4k256 --variants default shift
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (default = main's hstu_fwd_xpf_kernel 64x64; wide = bm64=1 128x64 8 warps 2 stages; shift = bm64=2)"
grep -E "^\| |rror|Traceback|capture|^rc|bitwise" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-220
echo "#### ncu B16 S4K D256 (default, shift)"
ncu_grep n4s
