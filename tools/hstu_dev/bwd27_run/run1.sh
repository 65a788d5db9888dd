#!/bin/bash
# bwd27 (issue 39, session 24), run 1 (<= 48 s), from the root of main's tree:
#   OUT=/tmp/o_bwd27 timeout 56 bash .carry/bwd27/run1.sh > /tmp/o_bwd27/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd27_run/pack.sh /work/main/.carry/bwd27)
# Wheel: cfg 7 (bf16, sm_90+, heads first): the default's loop with the grid's last sequences key blocks first
# (kPdsTailBlocksFirst); the default kernels unchanged (one launch prologue helper on the host).
# 1. GPU tests: cfg 7 against the fp32 reference and bitwise against the default (many sequences, D 64 / 128 / 256),
#    which kernel runs, and the one-barrier loop tests' causal cases with cfg 7 in them
# 2. time: cfg 0 / 7 / FA2 at B128 S1K D128, D64, D256 (interleaved rounds, median of 5)
# 3. count: the kernels of one backward; the no-mask line (a CTA, a full pair) against causal B128 S1K D128
LIM=48
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 15 tests/hstu/test_sm80_backward_gpu.py -k "tail_blocks_first or runs_its_kernel or \
(one_barrier and causal and not context and not mbar)"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 7 --reps 5 --impls ours fa2 \
    --shapes B128:S1024:D128 B128:S1024:D64 B128:S1024:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. count ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $C/count27.py --cfgs 0 7 \
    > $OUT/count.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = main's kernels (the default); cfg 7 = the last sequences key blocks first"
