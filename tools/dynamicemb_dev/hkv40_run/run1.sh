#!/bin/bash
# hkv40 run 1 (issue 35): the first pass (upsert_main_kernel) at loads 0.5 / 0.75 / 1.0, uniform and Zipf keys,
# main's path (lab 0) against variants in one process on the same snapshots and batches (evict_bench lab values q *
# 4096, q's bits: 1 = per-warp queue, no block barrier; 2 = half-size blocks; 4 = the probe's digest matches by a
# zero-byte test, match16_zb; run: q = 0, 1, 2, 3, 4, 7). The test: checksums of the
# table and of the evicted pairs, and the stats (ins / asg / evi) equal to lab 0's on every op and load. Then ncu of
# the first passes at load 0.5 (time, instructions, occupancy, issue, stalls).
B=54
. .carry/hkv40/common.sh
V=0,4096,8192,12288,16384,28672
eb uniform 16 26 20 5 - uniform 0.5,0.75,1 - $V
eb zipf 14 26 20 4 - zipf 0.5,0.75,1 - $V
first_digest() {
  echo "## first pass us (ratio to lab 0), total us, pending, stats, checksum match with lab 0"
  local f
  for f in "$@"; do
    echo "# $f"
    awk '/^(find_or_insert|insert_or_assign|insert_and_evict|assign) / {
           fp = ""; for (i = 1; i < NF; ++i) if ($i == "first") fp = $(i + 1)
           for (i = 1; i < NF; ++i) { if ($i == "table") tb = $(i + 1); if ($i == "evicted") ev = $(i + 1);
                                      if ($i == "pending") pd = $(i + 1); if ($i == "ins") ins = $(i + 1);
                                      if ($i == "asg") asg = $(i + 1); if ($i == "evi") evi = $(i + 1) }
           sig = tb "/" ev "/" ins "/" asg "/" evi
           if (!($1 in base)) { base[$1] = fp; bsig[$1] = sig }
           printf "%s %s first %s (%.3f) tot %s pend %s %s\n", substr($1, 1, 16), $2, fp,
                  (base[$1] > 0 ? fp / base[$1] : 0), $4, pd, (sig == bsig[$1] ? "same" : "DIFF " sig) }
         /^filled/ { delete base; delete bsig; print substr($0, 1, 62) }' $OUT/$f.txt
  done
  echo "total: $(elapsed) s"
}
first_digest uniform zipf
l=$(left)
if [ -n "$NCU" ] && [ $l -ge 10 ]; then
  M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_requests.sum
  timeout $(( l - 2 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_main" -c 12 \
    --section WarpStateStats --metrics $M --csv --page raw $EB 26 20 1 ncu uniform 0.5 - $V \
    > $OUT/ncu_first.csv 2> $OUT/ncu_first.err
  echo "## ncu first pass load 0.5 (find_or_insert x6 labs, insert_or_assign x6) rc $? ($(elapsed) s)"
  ncu_table $OUT/ncu_first.csv ab
  gzip -f $OUT/ncu_first.csv
fi
echo "total: $(elapsed) s"
