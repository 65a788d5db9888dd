#!/bin/bash
# rab40 (issue 39, session 37), run 3 (<= 45 s; the wheel of rab40's last commit: main's objects + the branch's fwd bf16
# D = 64 / 128 / 256 units and hstu_ops.cc), from the root of main's tree:
#   OUT=/tmp/out_rab40 timeout 56 bash .carry/rab40/run3.sh
# Run 1's tests.log was lost (the output tail): the GPU tests again, their digest printed last (within ~1,400
# characters), and the opt-in evict-first copies (case rabev; D = 64 last: rabf39's form faulted there).
# 1. test_sm80_forward_rab_smem (18; cfg 0 == cfg 9 bit for bit), then test_sm80_forward_rab_evict (6).
# 2. Time: bf16 B16 S4K H4 forward D = 128, 256, 64: causal / rab / rabev.
LIM=45
source "$(dirname "$0")/setup.sh"
run_tests 18 "rab_smem or rab_evict" tests/hstu/test_sm80_forward_gpu.py
bench /tmp/site_rab40 Ev $(( $(left) - 1 )) --reps 5 --dims 128 256 64 --dirs fwd --cases causal rab rabev
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (rabev = fwd_sm80_rab_evict=True; ms (ratio to causal))"
grep -E "^\| |rror|Traceback" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-160
echo "#### tests (-k 'rab_smem or rab_evict'; 24 cases)"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -6 | cut -c1-200
