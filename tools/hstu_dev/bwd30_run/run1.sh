#!/bin/bash
# bwd30 (issue 39, session 27), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd30 timeout 56 bash .carry/bwd30/run1.sh > /tmp/o_bwd30/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd30_run/pack.sh /work/main/.carry/bwd30 --no-wheel: main's wheel only)
# The count of one steady tile pair: ncu (source counters by part and SASS line, warp stalls, instruction stats,
# occupancy) of main's portable backward (.carry/main30/whl, the one-barrier default) and FA2's (torch SDPA flash),
# bf16 causal H4 B2 S8K, D = 64 then D = 128 (prof17.py's order: ours D64, FA2 D64, ours D128, FA2 D128); every
# kernel per warp and (64 x 128) tile pair (FA2's D64 128 x 128 tile counted per the same work). The SASS source
# page comes back gzipped (src30.csv.gz: shared-memory wavefronts and their excess per line, offline).
NAME=bwd30 MAIN=main30 LIM=49
source "$(dirname "$0")/setup15.sh"  # bwd15's setup (strict mode, OUT, R, C, left, wheels, GPU, ncu_sources)
rm -rf /tmp/site_$NAME && ln -s /tmp/site_${NAME}_main /tmp/site_$NAME  # (no branch wheel: main's kernels)
echo "== ncu ($SECONDS s)"
ncu_sources src30 4 $C/prof17.py --batch 2 --runs 64:8192:0 64:8192:fa2 128:8192:0 128:8192:fa2
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### ncu (B2 S8K: ours D64, FA2 D64, ours D128, FA2 D128; main30's wheel; per warp and (64 x 128) pair)"
ncu_summary
grep -E "l1tex__data_(bank|pipe_lsu_wave)|registers|sm__warps_active" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "^###|^\| |^opcodes" $OUT/src_parts.md 2>/dev/null | cut -c1-600
ls -la $OUT
