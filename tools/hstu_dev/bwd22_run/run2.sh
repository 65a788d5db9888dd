#!/bin/bash
# bwd22 (issue 39, session 21), run 2 (<= 43 s), from the root of main's tree:
#   OUT=/tmp/o_bwd22 timeout 60 bash .carry/bwd22/run2.sh > /tmp/o_bwd22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd22_run/pack.sh /work/main/.carry/bwd22)
# Wheel: the default heads first up to 2,048 keys (D = 64 / 128 / 256) with each sequence's dQ of a head converted by
# its last key block (kPdsConvertBehind, two tiles at a time); the convert pass by 16-byte lane slots (run 1's cfg 6,
# fixed); cfg 3 the other grid order (at S1K: batch first, the pass converts); cfg 7 (bf16) batch first converting
# dQ behind (any length).
# 1. GPU tests: the whole test_sm80_backward_gpu.py in one process; test_kernels_gpu's kernel-name tests
# 2. time: the default / cfg 3 / cfg 7, FA2, the peer at issue 39's shapes (+ B128 S1K D64 / D256); main21's wheel
# 3. memcheck (caching allocator off) of the dq-layout test's case of bwd21's fault, with the time left
LIM=43
source "$(dirname "$0")/setup.sh"
SHAPES=(B128:S1024:D128 B128:S1024:D256 B128:S1024:D64 B16:S4096:D128 B16:S4096:D256 B16:S8192:D64 B16:S16384:D128)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 25 $TF $TK::test_sm80_d256_backward_runs_the_layout_that_fits $TK::test_sm80_backward_candidate_runs_its_kernel
echo "== 2. time ($SECONDS s)"
PYTHONPATH=$PP timeout 9 python3 -P $B21 time --label bwd22 --cfgs 0 3 7 --reps 5 --impls ours fa2 peer \
    --shapes "${SHAPES[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=$PM timeout $(( $(left) > 9 ? 6 : $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label main21 \
    --cfgs 0 --reps 5 --impls ours --shapes "${SHAPES[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. memcheck ($SECONDS s)"
memcheck_layouts $(( $(left) - 1 )) "128-local_target-2-True-True"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | cut -c1-160 | tail -12
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//; s/.*:://' | sort | uniq -c
echo "#### time (ms; cfg 0 the default; cfg 3 the other order; cfg 7 batch first + convert behind; main21 = main's wheel)"
cut -c1-250 $OUT/time.log
