#!/bin/bash
# bwd35 (issue 39, session 32), run 3 (<= 50 s), from the root of main's tree:
#   OUT=/tmp/out_bwd35 timeout 56 bash .carry/bwd35/run3.sh
# (carry: bash tools/hstu_dev/bwd35_run/pack.sh /work/main/.carry/bwd35: the branch's wheel)
# Wheel: main's kernels + bwd_sm80_cfg=14 at D = 128 (bf16, heads first): the dQ workspace uninitialized, zeroed
# beside the loop by hstu_dq_zero_beside_kernel (16 CTAs, (sequence, head) items behind flags) while the loop
# (kPdsZeroWait, a programmatic dependent launch; 40 B of spills) runs on the other SMs; cfg 15: 14 with the dQ
# convert as a programmatic dependent launch behind the loop, last sequences first, lines dropped from L2 once read.
# Run 2 measured cfg 14 +3.0 to +5.2 % against cfg 0 (main's path): this run says where the time goes.
# 1. torch.profiler: every kernel of one backward (cfg 0, 14, 15) at B128 S1K D128 with its device time
# 2. time: cfg 0 / 14 / 15 / FA2 at B128 S1K and B64 S2K D128, median of 5, interleaved
# 3. GPU tests: test_sm80_backward_zero_beside (cfgs 14 and 15 against the reference and the default, poisoned
#    workspace), the one-barrier loop test's jagged D = 128 cases (every cfg, bitwise dK / dV)
LIM=50
source "$(dirname "$0")/setup.sh"
echo "== 1. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 14 python3 -P $B21 prof --cfgs 0 14 15 --impls ours \
    --shapes B128:S1024:D128 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $B21 time --label $NAME --cfgs 0 14 15 --reps 5 \
    --impls ours fa2 --shapes B128:S1024:D128 B64:S2048:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 1 : 2 )) $T::test_sm80_backward_zero_beside $T::test_sm80_backward_one_barrier \
    -k "zero or (128 and jagged)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-220 | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log 2>/dev/null | sed 's/\[.*//' | sort | uniq -c
echo "#### time (ms; cfg 0 = main's kernels, 14 = the workspace zeroed beside the loop, 15 = 14 + the convert behind it)"
cut -c1-250 $OUT/time.log
echo "#### prof"
grep -E "^#### prof|^  " $OUT/prof.log | cut -c1-110 | head -24
tail -3 $OUT/prof.log | cut -c1-200
