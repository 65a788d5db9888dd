#!/bin/bash
# fwd22 (issue 39, session 21), run 1 (<= 40 s), from the root of main's tree (main 95270e5 on the device):
#   OUT=/tmp/o_fwd22 timeout 60 bash .carry/fwd22/run.sh > /tmp/o_fwd22/stdout.txt 2>&1
# The branch: fwd_sm80_cfg=3 at D = 128 (128 x 64 tiles of 4 warps x 32 rows, K / V double-buffered, 32-key
# sub-tiles, the warps' Q fragments in registers: hstu_fwd_qreg_kernel), fwd_sm80_cfg=5 at D = 128 / 256 (the
# default's one-stage tiles with the first KV tile's V loaded in the prologue: hstu_fwd_vearly_kernel).
# 1. Tests (the branch's files in .carry/fwd22/tree): test_sm80_forward_gpu.py's candidates at D = 128 (every cfg
#    against the fp32 reference and the default), at D = 256 causal, the kernel each cfg runs.
# 2. Time (the branch only: cfg 0 runs main's kernels, their sm_90a SASS identical; main's wheel in run 2) on B16 S4K / S16K / B128 S1K D128 (cfg 0 / 1 / 3 / 5), B16 S4K / B256 S256 D256 (cfg
#    0 / 5), the peer, FA2; the Zipf / dense pair's kernels one by one (torch.profiler).
# 3. ncu: ours cfg 0 / 3 and the peer at B16 S16K D128; ours and the peer at B16 S4K D256.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 9 "(candidates and 128 and not gr and not context) or (candidates and 256 and causal and not local) or runs_its_kernel" -v -v $T
echo "== 2. time ($SECONDS s)"
CASES="s4k128 s16k128 b128 s4k256 b256"
jagp /tmp/site_fwd22 fwd22 11 --reps 5 --cases $CASES --d128-cfgs 0 1 3 5 --b256-cfgs 0 5 --peer --fa2
PYTHONPATH=/tmp/site_fwd22 timeout 3 python3 -P $J prof --prof > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
ncu_profile fwd22 5 --cases s16k128 s4k256 --d128-cfgs 0 3 --b256-cfgs 0 --peer
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k '(candidates and 128 and not gr and not context) or (candidates and 256"
echo "#### and causal and not local) or runs_its_kernel'; -v: PASSED per test)"
digest_verbose
digest_time
echo "#### Zipf / dense kernels (us per call)"
cut -c1-400 $OUT/prof.log | head -30
echo "#### ncu (kernel order: S16K D128 cfg 0, cfg 3, peer; S4K D256 cfg 0, peer)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu.log | tail -12 | cut -c1-200
cut -c1-300 $OUT/ncu_digest.md 2>/dev/null | head -80
