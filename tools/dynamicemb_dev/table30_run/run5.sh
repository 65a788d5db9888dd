#!/bin/bash
# table30 run 5 (issue 35; only if the lead has device time for it). Run 4's L16 (flag a summary only at its last
# entry) measured +2.7 to +5.6 % against L0, but on a table warmed on L6's path (flags at <= 3 entries, every
# flagged summary rebuilt after each warm-up op): one op of L16 from there flags few buckets (refresh 8.9 us: ~1/7 of
# L14's), which is not L16's steady state. Here each variant is warmed on its own path (one op on L6's to build every
# summary, then 15 of its own), in a process of its own: L14 / L16 against L0, and the count build's flags per op.
. .carry/table30/common.sh
chmod +x $C/eb_cnt
eb uniform_s14 10 26 20 5 - uniform 1 - 14,0
eb uniform_s16 10 26 20 5 - uniform 1 - 16,0
eb zipf_s16 10 26 20 5 - zipf 1 - 16,0
for L in 14 16; do
  echo "## counts L$L (marked_none = buckets flagged for the refresh)"
  timeout 8 $C/eb_cnt 26 20 1 - uniform 1 - $L > $OUT/count_l$L.txt 2>&1
  grep "^t30\|^summaries\|^find_or_insert" $OUT/count_l$L.txt | head -4
done
digest uniform_s14 uniform_s16 zipf_s16
