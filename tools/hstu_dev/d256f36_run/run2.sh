#!/bin/bash
# d256f36 (issue 39, session 33), run 2 (<= 48 s; the same wheel as run 1), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/d256f36/run2.sh > <dir>/stdout.txt 2>&1
# Run 1 (the lead's call 4): wide (fwd_sm80_bm64=1: 128 x 64 tiles of 8 warps, K / V double-buffered, one block per
# SM) 1.115x / 1.130x / 1.161x / 1.156x / 1.269x the default's time at B16 S4K / S8K, B128 / B64 S1K, B256 S256 D256,
# bitwise equal; ncu S4K: L2 bytes 9.38 -> 5.08 GB, long scoreboard 0.65 -> 0.33, but short scoreboard 0.88 -> 1.56,
# mio throttle 0.21 -> 0.55, math pipe throttle 0.26 -> 0.86, barrier 0.20 -> 0.39. The question: are those the 8
# warps of one block in lockstep (each SMSP's two warps in the same phase: both LDSM in S, both MUFU in the SiLU)?
# 1. GPU tests: pairs_wide and the D = 256 default's kernel-name / long-row tests (the relaxed asserts).
# 2. Time, wide first in each round (run 1: default first): B16 S4K, B256 S256 D256, FA2.
# 3. ncu with source counters (stall samples per SASS line), default and wide at B16 S4K, one launch each.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 13 "pairs_wide or (256 and (long_rows or candidate_runs_its_kernel))" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_d256f36 d256f36 10 --reps 5 --variants wide default --fa2 --cases s4k256 b256
echo "== 3. ncu ($SECONDS s)"
NCU_J=$J ncu_case src4k /tmp/site_d256f36 2 "hstu_fwd_xpf" --cases s4k256 --variants default wide
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (wide = fwd_sm80_bm64=1, first in each round; default = main's hstu_fwd_xpf_kernel 64x64)"
grep -E "^\| |rror|Traceback|capture|^rc" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-220
echo "#### ncu B16 S4K D256 (default, wide; the source page in src4k_src.csv.gz)"
ncu_grep src4k
ls -la $OUT/src4k_src.csv.gz 2>&1 | cut -c1-120
