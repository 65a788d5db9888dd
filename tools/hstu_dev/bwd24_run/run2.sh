#!/bin/bash
# bwd24 (issue 39, session 22), run 2 (<= 43 s), from the root of main's tree:
#   OUT=/tmp/o_bwd24 timeout 60 bash .carry/bwd24/run2.sh > /tmp/o_bwd24/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd24_run/pack.sh /work/main/.carry/bwd24)
# Run 1 (the count, main22): at B128 S1K D128 our workspace fill 62 us, main kernel 1448, dQ convert 180 (the
# peer's convert 113 us, its main kernel 1539); at B16 S4K D256 fill 60, main 5243, convert 172 (peer 137, 5651).
# Wheel: cfg 6 = the heads-first kernel zeroes its dQ workspace itself (no fill; elsewhere a memset + the default),
# cfg 7 = cfg 6 + the convert through shared memory (16-byte row stores).
# 1. GPU tests: the whole test_sm80_backward_gpu.py (cfg 6 / 7 in the loop, dq-layout and self-zeroing tests)
# 2. kernels of one backward: cfg 0 / 6 / 7 at B128 S1K D128 and B16 S4K D256
# 3. time: cfg 0 / 6 / 7, FA2, the peer (interleaved rounds)
LIM=43
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 23 $TF
echo "== 2. prof ($SECONDS s)"
PYTHONPATH=$PP timeout 6 python3 -P $P24 --shapes B128:S1024:D128 B16:S4096:D256 --impls ours --cfgs 0 6 7 \
    > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. time ($SECONDS s)"
PYTHONPATH=$PP timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label bwd24 --cfgs 0 6 7 --reps 5 \
    --impls ours fa2 peer --shapes B128:S1024:D128 B16:S4096:D256 B128:S1024:D256 B16:S4096:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 the default (= main22's kernels); cfg 6 self-zeroing workspace; cfg 7 cfg 6 + the convert by rows"
