#!/bin/bash
# fwd21 (issue 39, session 20), run 1 (<= 40 s), from the root of main's tree (main 4f9dd10 on the device):
#   OUT=/tmp/o_fwd21 timeout 60 bash .carry/fwd21/run.sh > /tmp/o_fwd21/stdout.txt 2>&1
# The branch: fwd_sm80_cfg=3 (D = 64: the default tile with Q's fragments in registers, hstu_fwd_qreg_kernel),
# fwd_sm80_cfg=5 (D = 64: 3 in 32-key sub-tiles with each sub-tile's S computed before the SiLU of the one before,
# hstu_fwd_qpipe_kernel), fwd_sm80_cfg=3 at D = 256 (the warp pairs, the longest-first grid's chunks of sequences at
# most 8 MB of K / V: 32 sequences at S256); the split block's first-partial load moved into fwd_split_sum.
# 1. Tests (the branch's files in .carry/fwd21/tree): test_sm80_forward_gpu.py's candidates (cfg 3 / 5 with every mask
#    against the reference and the default), the kernel each cfg runs, the split (chunks of 1, 2, 3 and the rule);
#    test_kernels_gpu.py's sm80-class forward against the reference.
# 2. Time: main20 vs the branch: B16 S8K D64 (cfg 0 / 3 / 5, the peer, FA2), B256 S256 D256 (cfg 0 / 2 / 3, the
#    peer, FA2), Zipf / dense at D = 64 / 256 with 3 contexts.
# 3. ncu: ours (cfg 0, 5), the peer, FA2 at B16 S8K D64; ours (cfg 0), the peer, FA2 at B256 S256 D256.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
K="(candidates and not gr and not context and not 128) or runs_its_kernel or sm80_and_sm90"
run_tests 10 "$K or (split and not over_two and not workspace)" -v -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
jagp /tmp/site_main main20 5 --reps 5 --cases s8k b256 zipf
jagp /tmp/site_fwd21 fwd21 9 --reps 5 --cases s8k b256 zipf --cfgs 0 3 5 --b256-cfgs 0 2 3 --peer --fa2
echo "== 3. ncu ($SECONDS s)"
ncu_profile fwd21 7 --cases s8k b256 --cfgs 0 5 --b256-cfgs 0 --peer --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k '(candidates and not gr and not context and not 128) or runs_its_kernel"
echo "#### or (split and not over_two and not workspace)'; test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_"
echo "#### reference; -v: PASSED per test)"
digest_verbose
echo "#### time (main20 = main 4f9dd10's wheel, fwd21 = the branch's; sm90=False; cfg n = fwd_sm80_cfg; peer = NVIDIA's"
echo "#### Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
echo "#### ncu (kernel order: S8K D64 cfg 0, cfg 5, peer, FA2; B256 S256 D256 cfg 0, peer, FA2)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu.log | tail -12 | cut -c1-200
cut -c1-300 $OUT/ncu_digest.md 2>/dev/null | head -80
