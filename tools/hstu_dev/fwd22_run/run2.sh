#!/bin/bash
# fwd22 (issue 39, session 21), run 2 (<= 40 s), from the root of main's tree (main 95270e5 on the device):
#   OUT=/tmp/o_fwd22 timeout 60 bash .carry/fwd22/run2.sh > /tmp/o_fwd22/stdout.txt 2>&1
# The wheel (branch fwd22 after run 1): the bf16 default at D = 128 (long rows, no contexts) = candidate 3 (128 x 64
# tiles of 4 warps x 32 rows, K / V double-buffered, 32-key sub-tiles, Q in registers: hstu_fwd_qreg_kernel) where
# two of its blocks fit per SM; fwd_sm80_cfg=5 = the default's one-stage tiles (D = 128 candidate 2, D = 256 the
# pairs) with the first KV tile's V loaded in the prologue (hstu_fwd_vearly_kernel); cfg 2 = the old D = 128 default.
# 1. Tests (the branch's files in .carry/fwd22/tree; one pytest, -v): the kernel each cfg runs, the defaults' kernels
#    and outputs (long rows, contexts), test_kernels_gpu.py's sm80-class forward against the reference.
# 2. Time: main21 vs the branch on issue 39's five shapes, B256 S256 D256 (cfg 0 / 2 / 5 at D = 128, 0 / 5 at
#    D = 256), the peer, FA2; the Zipf / dense pair's kernels one by one (torch.profiler), the branch's wheel.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 13 "runs_its_kernel or default_long_rows or default_contexts or sm80_and_sm90" -v -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
time_pair 5 "s16k128 s4k128 b128 s4k256 b256 s8k" --d128-cfgs 0 2 5 --b256-cfgs 0 5 --peer --fa2
PYTHONPATH=/tmp/site_fwd22 timeout $(( $(left) - 1 )) python3 -P $J prof --prof > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'runs_its_kernel or default_long_rows or default_contexts';"
echo "#### test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference; -v)"
digest_verbose
digest_time
echo "#### Zipf / dense kernels (us per call; the branch's wheel)"
cut -c1-400 $OUT/prof.log | head -30
