#!/bin/bash
# fwd23 (issue 39, session 21), run 1 (<= 40 s), from the root of main's tree (main 95270e5 on the device):
#   OUT=/tmp/o_fwd23 timeout 60 bash .carry/fwd23/run.sh > /tmp/o_fwd23/stdout.txt 2>&1
# (Ran once, on the wheel of fwd23 e7073eb; both variants measured slower and were removed after it: the kernels
# it names exist only at that commit.)
# The branch: fwd_sm80_cfg=5 at D = 256 = the default's warp pairs (candidate 3, short chunks capped) with K / V
# double-buffered in 64 x 32 tiles (one block barrier per 32 keys, the pair's P behind a 64-thread named barrier).
# LAB in this wheel only: fwd_sm80_cfg=6 at D = 256 = 5's loop in 128 x 32 tiles of 4 warp pairs (8 warps, one block
# per SM, 138 KB: half the L2 bytes per query row).
# 1. Tests (the branch's files in .carry/fwd23/tree): test_sm80_forward_gpu.py's candidates at D = 256 (every cfg incl.
#    5 against the fp32 reference and the default, every mask, jagged / dense), the GR convention, the kernel each
#    cfg runs; test_fwd23_lab.py: the lab cfg 6 at D = 256 on the same cases.
# 2. Time: fwd22's final wheel (the base) on B16 S4K / B256 S256 D256, then the branch's cfg 0 / 5 / 6, the peer, FA2.
# 3. ncu (time left): ours cfg 0 / 5 / 6 at B16 S4K D256.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
run_tests 14 "(candidates and 256) or runs_its_kernel or fwd23_lab" -v -v $T tests/hstu/test_fwd23_lab.py
echo "== 2. time ($SECONDS s)"
CASES="s4k256 b256"
jagp /tmp/site_fwd23base fwd22 5 --reps 5 --cases $CASES --b256-cfgs 0
jagp /tmp/site_fwd23 fwd23 12 --reps 5 --cases $CASES --b256-cfgs 0 5 6 --peer --fa2
echo "== 3. ncu ($SECONDS s)"
ncu_profile fwd23 3 --cases s4k256 --b256-cfgs 0 5 6
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py test_fwd23_lab.py -k '(candidates and 256) or runs_its_kernel or fwd23_lab'; -v)"
digest_verbose
digest_time
echo "#### ncu (kernel order: S4K D256 cfg 0, cfg 5, cfg 6)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu.log 2>/dev/null | tail -6 | cut -c1-200
cut -c1-300 $OUT/ncu_digest.md 2>/dev/null | head -60
