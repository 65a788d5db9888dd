#!/bin/bash
# fwd21 (issue 39, session 20), run 2 (<= 40 s), from the root of main's tree (main 4f9dd10 on the device):
#   OUT=/tmp/o_fwd21 timeout 60 bash .carry/fwd21/run2.sh > /tmp/o_fwd21/stdout.txt 2>&1
# The wheel (branch fwd21 after run 1): the bf16 default at D = 64 (long rows, no contexts) = candidate 3 (1's tile
# with Q's fragments in registers, hstu_fwd_qreg_kernel); at D = 256 = candidate 3 (the warp pairs with the
# longest-first grid's chunks capped at 8 MB of K / V); cfg 5 = the D = 64 / 128 defaults with that cap (a
# comparison); cfg 1 = the old defaults (D = 64 1's tile, D = 256 the pairs uncapped); the split block's
# first-partial load in fwd_split_sum.
# 1. Tests (the branch's files in .carry/fwd21/tree; one pytest, -v): the defaults' kernels and outputs (long rows,
#    contexts, the kernel each cfg runs), the split (chunks of 1, 2, 3 and the rule; over two waves; the list and
#    workspace bounds), test_kernels_gpu.py's sm80-class forward against the reference. (Run 3: the candidates.)
# 2. Time: main20 vs the branch on issue 39's five shapes, B256 S256 D256 and the Zipf / dense pair, the peer, FA2.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
run_tests 17 "runs_its_kernel or default_long_rows or default_contexts or split or sm80_and_sm90" -v -v $T \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
CASES="s8k s4k128 s16k128 b128 s4k256 b256 zipf"
jagp /tmp/site_main main20 7 --reps 5 --cases $CASES
jagp /tmp/site_fwd21 fwd21 $(( $(left) - 1 )) --reps 5 --cases $CASES --cfgs 0 1 5 --d128-cfgs 0 5 \
  --b256-cfgs 0 1 --peer --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'runs_its_kernel or default_long_rows or default_contexts or split';"
echo "#### test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference; -v)"
digest_verbose
echo "#### time (main20 = main 4f9dd10's wheel, fwd21 = the branch's; sm90=False; cfg n = fwd_sm80_cfg; peer = NVIDIA's"
echo "#### Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
