#!/bin/bash
# fwd33 (issue 39, session 30), run 1 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd33/run1.sh > <dir>/stdout.txt 2>&1
# The branch's wheel adds hstu_fwd_persist_kernel (kernel_options(fwd_sm80_bm64=1) at D = 256: the default's warp
# pairs as a persistent grid, the next query tile's Q / first K copied during the epilogue). Its default kernel is
# main's (the sm80 units are unchanged). Question: is the persistent grid right (bitwise the default, the error
# rule) and faster at B256 S256 D256 (predicted 0.93-0.97x the default's time), not slower at the longer rows?
# 1. GPU tests: test_sm80_forward_persist_d256 (6 mask cases x 2 batches).
# 2. Time in one process: default, pers, FA2 at B256 S256, B128 S512, B64 S1K, B16 S4K D256 (5 rounds).
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 20 "persist_d256" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd33 fwd33 $(( $(left) - 1 )) --reps 5 --variants default pers --fa2 --cases b256 b128s512d256 b64s1k256 s4k256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (fwd33 = the branch's wheel: default = main's kernel hstu_fwd_xpf_kernel; pers = hstu_fwd_persist_kernel;"
echo "#### sm90=False; alpha D^-1/2; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
