#!/bin/bash
# bwd31 (issue 39, session 28), run 3 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd31 timeout 56 bash .carry/bwd31/run3.sh > /tmp/o_bwd31/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd31_run/pack.sh /work/main/.carry/bwd31; run 2's wheel, b5233ad's kernels)
# Whether cfg 14 (D = 64: running pointers + the lane offsets once per key block; run 2: -0.8 / -0.9 % at B16 S8K /
# S4K, batch first) should be D = 64's default:
# 1. time: cfg 0 / 13 / 14 / FA2 at B16 S8K / S4K D64 (batch first) and B128 S1K / B64 S2K D64 (heads first, the
#    tail key blocks first: cfg 14's other kernel, untimed in run 2), median of 9, interleaved
# 2. GPU tests: every D = 64 case of test_sm80_backward_gpu.py (the loop tests now run cfg 13 / 14 too: contexts,
#    targets, delta-q, seqused, rab / drab, deterministic dQ) and the running-pointer test, in the time left
LIM=49 NAME=bwd31 BASE=main31
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 17 python3 -P $B21 time --label $NAME --cfgs 0 13 14 --reps 9 --impls ours fa2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B128:S1024:D64 B64:S2048:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
gpu_tests $(( $(left) > 4 ? $(left) - 3 : 1 )) tests/hstu/test_sm80_backward_gpu.py -k "[64- or running_pointers"
digest "cfg 0 = the default (main's kernels); 13 = running pointers; 14 = 13 + lane offsets once"
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
