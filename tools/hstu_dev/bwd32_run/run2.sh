#!/bin/bash
# bwd32 (issue 39, session 29), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd32 timeout 56 bash .carry/bwd32/run2.sh > /tmp/o_bwd32/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd32_run/pack.sh /work/main/.carry/bwd32; run 1's wheel)
# 1. time: cfg 0 / 13 / 15 / FA2 at B16 S8K D64 and B64 S2K D64 (heads first), cfg 0 / FA2 at B16 S4K D128 (no change
#    expected: the D = 128 kernels are main's), median of 9, interleaved
# 2. ncu source counters (B2 S8K D64, one launch each: the default, cfg 15, FA2): instructions, ldmatrix and MMAs per
#    warp and (64 x 128) pair (FA2's 128 x 128 tile counted per the same work), stalls
LIM=49 NAME=bwd32 MAIN=main32
source "$(dirname "$0")/setup15.sh"  # bwd15's setup (OUT, R, C, left, both wheels, GPU, ncu_sources, ncu_summary)
B21=$C/bwd21.py
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 13 15 --reps 9 --impls ours fa2 \
    --shapes B16:S8192:D64 B64:S2048:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 6 python3 -P $B21 time --label $NAME --cfgs 0 --reps 9 --impls ours fa2 \
    --shapes B16:S4096:D128 >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
ncu_sources src32 3 $C/prof17.py --batch 2 --runs 64:8192:0 64:8192:c15 64:8192:fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; cfg 0 = the default (running pointers + lane offsets once); 13 = main's loop; 15 = dQ split)"
cut -c1-250 $OUT/time.log
echo "#### ncu (B2 S8K D64: cfg 0, cfg 15, FA2; per warp and (64 x 128) pair)"
ncu_summary
grep -E "registers" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "^###|^\| (MMA|ldmatrix|FP32|int|uniform|moves|control|cp.async|reductions|shared|global)|^opcodes" \
    $OUT/src_parts.md 2>/dev/null | cut -c1-300
