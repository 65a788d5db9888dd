#!/bin/bash
# bwd33 (issue 39, session 30), run 2 (<= 40 s), from the root of main's tree:
#   OUT=/tmp/o_bwd33 timeout 56 bash .carry/bwd33/run2.sh > /tmp/o_bwd33/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd33_run/pack.sh /work/main/.carry/bwd33; run 1's wheel)
# Run 1: cfg 15 (128-query tiles) 6.8 / 6.4 / 2.5 % faster than the default at B16 S8K / S4K, B128 S1K D64.
# 1. time (the second run): cfg 0 / 15 / FA2 at B16 S8K / S4K D64 (batch first), B64 S2K D64 (heads first), median
#    of 7, interleaved
# 2. ncu source counters + warp states in the time left (B2 S8K D64, one launch each: the default, cfg 15):
#    instructions, ldmatrix, MMAs, reductions per warp and (64 x 128) pair, stalls
LIM=35 NAME=bwd33 MAIN=main33
source "$(dirname "$0")/setup15.sh"  # bwd15's setup (OUT, R, C, left, both wheels, GPU, ncu_sources, ncu_summary)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $C/bwd21.py time --label $NAME --cfgs 0 15 --reps 7 \
    --impls ours fa2 --shapes B16:S8192:D64 B16:S4096:D64 B64:S2048:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
ncu_sources src33 2 $C/prof17.py --batch 2 --runs 64:8192:0 64:8192:c15
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; cfg 0 = the default (main's kernels); 15 = 128-query tiles)"
cut -c1-250 $OUT/time.log
echo "#### ncu (B2 S8K D64: cfg 0, cfg 15; per warp and (64 x 128) pair)"
ncu_summary
grep -E "registers|lg_throttle|lsu|l1tex__t_|lts__t" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "^###|^\| |^opcodes" $OUT/src_parts.md 2>/dev/null | cut -c1-300 | head -60
ls -la $OUT
