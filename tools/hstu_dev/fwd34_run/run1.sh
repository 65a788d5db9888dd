#!/bin/bash
# fwd34 (issue 39, session 31), run 1 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd34/run1.sh > <dir>/stdout.txt 2>&1
# The D = 256 warp pairs' fixed part (B256 S256: 1-4 KV steps a block, ~4.9 us of ~12 us fixed): vepw = the first V
# copy in the prologue beside Q's and K's and the epilogue staged per warp without the block's barriers; l2n = the
# next block's (one SM count further in the grid) Q and first K / V tiles prefetched into L2; all = both.
# Question: are they faster than the default at B256 S256 (predicted vepw 0.98-0.995x, l2n 0.94-0.98x) and within
# +-1 % at the longer rows?
# 1. GPU tests: test_sm80_forward_pairs_fixed_part (6 mask cases x 2-3 batches x 3 variants, bit for bit the default).
# 2. Time in one process: default, vepw, l2n, all, FA2 at B256 S256, B128 S512, B64 S1K, B16 S4K D256 (7 rounds).
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 20 "pairs_fixed_part" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd34 fwd34 $(( $(left) - 2 )) --reps 7 --variants default vepw l2n all --fa2 --cases b256 b128s512d256 b64s1k256 s4k256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (fwd34 = the branch's wheel: default = main's kernel hstu_fwd_xpf_kernel; vepw / l2n / all ="
echo "#### hstu_fwd_xpfx_kernel<..., 3 / 4 / 7>; sm90=False; alpha D^-1/2; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
