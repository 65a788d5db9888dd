#!/bin/bash
# bwd24 (issue 39, session 22), run 1 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_bwd24 timeout 60 bash .carry/bwd24/run.sh > /tmp/o_bwd24/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd24_run/pack.sh /work/main/.carry/bwd24)
# The count before any change: main22's wheel (no branch wheel in this run).
# 1. GPU tests: the whole test_sm80_backward_gpu.py in one process (main22's kernels)
# 2. kernels of one backward (torch.profiler, mean of 3): ours / FA2 / the peer at B128 S1K D128 and B16 S4K D256
#    (how much is the main kernel, the workspace's zeroing, the dQ convert, FA2's dot(dO, O))
# 3. time: ours / FA2 / the peer at issue 39's five shapes + B128 S1K D256 (interleaved rounds)
LIM=42
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 17 $TF
echo "== 2. prof ($SECONDS s)"
PYTHONPATH=$PM timeout 9 python3 -P $P24 --shapes B128:S1024:D128 B16:S4096:D256 --impls ours fa2 peer \
    > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. time ($SECONDS s)"
PYTHONPATH=$PM timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label main22 --cfgs 0 --reps 5 \
    --impls ours fa2 peer --shapes B128:S1024:D128 B16:S4096:D256 B16:S4096:D128 B16:S8192:D64 \
    B128:S1024:D256 B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
digest "main22's wheel; the peer = NVIDIA's Ampere HSTU"
