#!/bin/bash
# rabf38 (issue 39, session 35), run 3 (<= 25 s of work; run 2's wheel = the final sm_90a code), from the root of
# main's tree:   OUT=/tmp/out_rabf38 timeout 56 bash .carry/rabf38/run3.sh
# Other shapes than B16 S4K (runs 1-2; GPU tests passed there twice): bf16 H4 forward, B64 S1K and B4 S16K, D = 64
# and 128, causal / rab against main's kernels in one process (:10 = main's D = 64 kernel, :11 = main's D = 128).
LIM=40
source "$(dirname "$0")/setup.sh"
echo "== time ($SECONDS s)"
bench /tmp/site_rabf38 S1K 10 --reps 7 --batch 64 --seqlen 1024 --dims 64 128 --dirs fwd --cases causal rab rab:10 rab:11
bench /tmp/site_rabf38 S16K 12 --reps 5 --batch 4 --seqlen 16384 --dims 64 128 --dirs fwd --cases causal rab rab:10 rab:11
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); rab = the branch's (D64 128 x 128 tiles with the"
echo "#### warps' rab slots, D128 unpredicated copies + rab as S's start); :10 = main's D64 kernel (D128: = rab);"
echo "#### :11 = main's D128 kernel (D64: = rab); rab (B,H,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
