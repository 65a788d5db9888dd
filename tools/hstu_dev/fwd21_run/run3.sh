#!/bin/bash
# fwd21 (issue 39, session 20), run 3 (<= 30 s), from the root of main's tree (main 4f9dd10 on the device):
#   OUT=/tmp/o_fwd21 timeout 60 bash .carry/fwd21/run3.sh > /tmp/o_fwd21/stdout.txt 2>&1
# The final wheel: run 2's but D = 256's chunk cap only where a sequence has at most 4 query tiles (32 sequences per
# chunk; run 2: the 8 MB cap made S4K D256 4.5 % slower) and cfg 5 removed. The split's code is run 2's.
# 1. Tests (the branch's files in .carry/fwd21/tree; one pytest, -v): the candidates at D = 64 / 128 / 256 with every
#    mask (every cfg against the fp32 reference and the default; the GR convention) and the defaults' kernels and
#    outputs (long rows, contexts, the kernel each cfg runs): with run 2's split tests, test_sm80_forward_gpu.py.
# 2. Time (the branch only; main's wheel did not install in run 2): the defaults against cfg 1 (the old defaults:
#    D = 64 1's tile, D = 256 the pairs uncapped) on B16 S8K D64, B256 S256 D256 and B16 S4K D256, the peer, FA2.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
run_tests 19 "candidates or runs_its_kernel or default_long_rows or default_contexts" -v -v $T
echo "== 2. time ($SECONDS s)"
jagp /tmp/site_fwd21 fwd21 $(( 29 - SECONDS )) --reps 5 --cases s8k b256 s4k256 --cfgs 0 1 --b256-cfgs 0 1 --peer --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'candidates or runs_its_kernel or default_long_rows or"
echo "#### default_contexts'; -v)"
digest_verbose
echo "#### time (fwd21 = the branch's wheel; sm90=False; cfg n = fwd_sm80_cfg; peer = NVIDIA's Ampere HSTU;"
echo "#### FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
