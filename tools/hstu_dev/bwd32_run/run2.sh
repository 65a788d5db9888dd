#!/bin/bash
# bwd32 (issue 39, session 29), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd32 timeout 56 bash .carry/bwd32/run2.sh > /tmp/o_bwd32/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd32_run/pack.sh /work/main/.carry/bwd32; run 1's wheel)
# Run 1: cfg 15 (dQ split over the keys: 16 ldmatrix a warp and pair in phase 3 instead of 24, 8 dQ red.v4 instead
# of 4) 2.3-2.6 % slower than the default. Why, and the pair's counts against FA2:
# 1. ncu source counters + warp states (B2 S8K D64, one launch each: the default, cfg 15, FA2): instructions,
#    ldmatrix, MMAs, reductions per warp and (64 x 128) pair (FA2's 128 x 128 tile counted per the same work), stalls
# 2. time in the time left: cfg 0 / 13 / 15 / FA2 at B16 S8K D64 and B64 S2K D64 (heads first), median of 7
LIM=49 NAME=bwd32 MAIN=main32
source "$(dirname "$0")/setup15.sh"  # bwd15's setup (OUT, R, C, left, both wheels, GPU, ncu_sources, ncu_summary)
echo "== 1. ncu ($SECONDS s)"
LIM=37 ncu_sources src32 3 $C/prof17.py --batch 2 --runs 64:8192:0 64:8192:c15 64:8192:fa2
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $C/bwd21.py time --label $NAME \
    --cfgs 0 13 15 --reps 7 --impls ours fa2 --shapes B16:S8192:D64 B64:S2048:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; cfg 0 = the default (running pointers + lane offsets once); 13 = main's loop; 15 = dQ split)"
cut -c1-250 $OUT/time.log
echo "#### ncu (B2 S8K D64: cfg 0, cfg 15, FA2; per warp and (64 x 128) pair)"
ncu_summary
grep -E "registers|lg_throttle|lsu|l1tex__t_|lts__t" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "^###|^\| |^opcodes" $OUT/src_parts.md 2>/dev/null | cut -c1-300 | head -60
ls -la $OUT
