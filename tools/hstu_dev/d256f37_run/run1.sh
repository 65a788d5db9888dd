#!/bin/bash
# d256f37 (issue 39, session 34), run 1 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/d256f37/run1.sh > <dir>/stdout.txt 2>&1
# The branch's wheel (main37's objects + the branch's D = 256 bf16 forward unit and op): g1 = kernel_options(
# fwd_sm80_cfg=13) (FwdSm80PairsGrp<1>, hstu_fwd_xpfg_kernel<..., 1>: each warp group (warps w % 2, w % 2 + 2) copies
# the K key half / V column half it reads, 64-thread group and pair barriers instead of the block's two, P slots by
# step parity), g3 = 14 (<..., 3>: g1 with the V copy spread over S's first k16 steps, the next K over P V's);
# default = main's hstu_fwd_xpf_kernel.
# 1. GPU tests: test_sm80_forward_pairs_grp (error rule, bit for bit the default, the kernels' names).
# 2. Time in one process (5 rounds): default, g1, g3, g2 (14 with fwd_sm80_interleave=False: <2>), FA2 at B16 S4K / S8K, B64 S1K, B256 S256 D256.
# 3. ncu (one launch each, pipes / warp states / L2 / shared wavefronts): default, g1, g3 at B16 S4K.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 14 "pairs_grp" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_d256f37 d256f37 13 --reps 5 --variants default g1 g3 g2 --fa2 --cases s4k256 b256 s8k256 b64s1k256
echo "== 3. ncu ($SECONDS s)"
ncu36 n4k /tmp/site_d256f37 3 "hstu_fwd_xpf" --cases s4k256 --variants default g1 g3
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (default = main's hstu_fwd_xpf_kernel; g1 = fwd_sm80_cfg=13; g3 = 14; g2 = 14 noilv)"
grep -E "^\| |rror|Traceback|capture|^rc|bitwise" $OUT/time.log | grep -v "^| case\|^|---" | cut -c1-200
echo "#### ncu B16 S4K D256 (default, g1, g3)"
ncu_grep n4k
