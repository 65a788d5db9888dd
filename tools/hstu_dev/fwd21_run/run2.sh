#!/bin/bash
# fwd21 (issue 39, session 20), run 2 (<= 40 s), from the root of main's tree (main 4f9dd10 on the device):
#   OUT=/tmp/o_fwd21 timeout 60 bash .carry/fwd21/run2.sh > /tmp/o_fwd21/stdout.txt 2>&1
# DRAFT: the wheel and the cases follow run 1.
# 1. Tests (the branch's files in .carry/fwd21/tree; one pytest, -v): the whole test_sm80_forward_gpu.py and
#    test_kernels_gpu.py's sm80-class forward tests against the reference.
# 2. Time: main20 vs the branch (default and the comparison cfgs), the peer, FA2.
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
run_tests 24 "not nothing" -v -v $T tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
jagp /tmp/site_main main20 5 --reps 5 --cases s8k b256 s4k256 zipf
jagp /tmp/site_fwd21 fwd21 $(( $(left) - 1 )) --reps 5 --cases s8k b256 s4k256 zipf --cfgs 0 1 --b256-cfgs 0 1 --peer --fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py, test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference; -v)"
grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (main20 = main 4f9dd10's wheel, fwd21 = the branch's; sm90=False; cfg n = fwd_sm80_cfg; peer = NVIDIA's"
echo "#### Ampere HSTU (.carry/peer); FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
