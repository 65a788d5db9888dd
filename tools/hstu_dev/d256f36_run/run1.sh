#!/bin/bash
# d256f36 (issue 39, session 33), run 1 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/d256f36/run1.sh > <dir>/stdout.txt 2>&1
# The branch's wheel: kernel_options(fwd_sm80_bm64=1) at D = 256 = "wide" (FwdSm80PairsWide: 128 x 64 tiles of 8
# warps, K / V double-buffered, one block per SM); "default" = main's kernel (hstu_fwd_xpf_kernel, 64 x 64 tiles).
# 1. GPU tests: test_sm80_forward_pairs_wide (error rule, bit for bit the default, the kernel's name).
# 2. Time in one process (7 rounds): default, wide, FA2 at B16 S4K / S8K, B128 S1K, B64 S1K, B256 S256 D256.
# 3. ncu (one launch each): default and wide at B16 S4K, default at B256 S256.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 16 "pairs_wide" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_d256f36 d256f36 14 --reps 7 --variants default wide --fa2 --cases s4k256 s8k256 b128s1k256 \
  b64s1k256 b256
echo "== 3. ncu ($SECONDS s)"
ncu36 n4k /tmp/site_d256f36 3 "hstu_fwd_xpf" --cases s4k256 --variants default wide
ncu36 n256 /tmp/site_d256f36 1 "hstu_fwd_xpf" --cases b256 --variants default
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (default = main's hstu_fwd_xpf_kernel 64x64; wide = fwd_sm80_bm64=1, 128x64 8 warps 2 stages)"
grep -E "^\| |rror|Traceback|capture|^rc|bitwise" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-220
echo "#### ncu B16 S4K D256 (default, wide)"
ncu_grep n4k
echo "#### ncu B256 S256 D256 (default)"
ncu_grep n256
