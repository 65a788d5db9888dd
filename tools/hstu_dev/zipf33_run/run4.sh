#!/bin/bash
# zipf33 (issue 39, session 30), run 4 (<= 40 s; run 3's wheel, the final code), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/zipf33/run4.sh > <dir>/stdout.txt 2>&1
# Run 1: the split's list kernel is 7.2-8.7 us of a 34-64 us call (a quarter of the Zipf D64 call) and the split
# kernel runs 0.94x the dense pair's time for 0.80x its steps. Where do they spend it? ncu (speed of light, warp
# states, instruction stats, launch stats, source counters: the top stall locations) of both kernels on the Zipf
# batch and its dense twin at D = 64 (the Zipf batch's second call and the dense batch's first: 4 kernels), caches
# and clocks left alone; the raw page through
# bwd15's digest, the details page (the stall locations) and the SASS source page (csv.gz) for reading here.
source "$(dirname "$0")/setup.sh"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "== ncu ($SECONDS s; $NCU)"
sec="SpeedOfLight WarpStateStats InstructionStats LaunchStats Occupancy SourceCounters"
PYTHONPATH=/tmp/site_zipf33 timeout 25 $NCU --clock-control none --cache-control none \
  -k "regex:hstu_sm80_fwd_list_kernel|hstu_fwd_split_qearly" -s 2 -c 4 $(printf -- "--section %s " $sec) \
  -o $OUT/z33 -f python3 -P $C/jag/zipf33_ncu.py 64 > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
timeout 3 $NCU --import $OUT/z33.ncu-rep --page raw --csv --print-metric-instances values > $OUT/z33_raw.csv \
  2>> $OUT/ncu.log
python3 $C/jag/ncu_digest.py $OUT/z33_raw.csv > $OUT/z33_digest.md 2>&1
timeout 2 $NCU --import $OUT/z33.ncu-rep --page details > $OUT/z33_details.txt 2>> $OUT/ncu.log
timeout 3 $NCU --import $OUT/z33.ncu-rep --page source --csv --print-source sass 2>> $OUT/ncu.log |
  gzip > $OUT/z33_src.csv.gz
echo "exports done ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### ncu, Zipf / dense D64 (list kernel, split kernel: the Zipf batch's second call, the dense batch's first)"
grep -E "^ncu:|rror|==PROF==|Traceback|done" $OUT/ncu.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|inst_executed.sum |issue_active.avg.pct|warps_active.avg.per_cycle|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch|lg_throttle|membar|drain|branch|no_inst).*ratio" \
  $OUT/z33_digest.md 2>/dev/null | cut -c1-220
