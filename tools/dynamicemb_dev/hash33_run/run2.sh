#!/bin/bash
# hash33 run 2 (issue 35, load 1.0): run 1 measured design C's insert pass +13 % slower than main's (+30 % warp
# instructions) and found a wrong victim under `dupnew` insert_and_evict (a restored announce had ranked the held slot
# above its true rank). Here: C fixed (variant 3: the announce zeroes the held slot's score first, fenced) and C
# without its duplicate protocol (variant 4: the lock-free claim alone; wrong with repeated missing keys, so not run
# on dupnew) against main's insert pass (variant 0), interleaved in one process (evict_bench, uint64 / fp32 dim 32 /
# LRU, 2^26 slots, 1M keys at HKV's fill, 5 reps); equal checksums = the same evictions. Then ncu with source
# counters of find_or_insert's insert pass L0 / L3 / L4 (2^24 slots, 256K keys): the SASS page, for sass_phases.py.
. .carry/hash33/common.sh
eb uniform_034 9 26 20 5 - uniform 1 - 0,3,4
eb uniform_430 9 26 20 5 - uniform 1 - 4,3,0
eb zipf_034 10 26 20 5 - zipf 1 - 0,3,4
eb dupnew_03 9 26 20 5 - dupnew 1 - 0,3
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout $(( $(left) - 6 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert_kernel" -c 3 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section SpeedOfLight \
  --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
  -o /tmp/h33eb -f $C/eb_lab 24 18 1 ncu uniform 1 - 0,3,4 > /tmp/h33ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
tail -3 /tmp/h33ncu.log
$NCU --import /tmp/h33eb.ncu-rep --page raw --csv > $OUT/ncu_raw.csv 2>/dev/null
timeout $(left) $NCU --import /tmp/h33eb.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>/dev/null
echo "export rc $? ($(( $(date +%s) - t0 )) s)"
python3 - "$OUT/ncu_raw.csv" <<'PY' || true
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')]
rows = list(csv.reader(lines[start[0]:])) if start else []
if len(rows) > 2:
    h = rows[0]
    for w in ["Kernel Name", "gpu__time_duration.sum", "smsp__inst_executed.sum", "smsp__thread_inst_executed.sum",
              "smsp__average_warp_latency_per_inst_issued.ratio",
              "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
              "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio",
              "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio"]:
        if w in h:
            i = h.index(w)
            print("| " + w[:60] + " | " + " | ".join(r[i][:36] for r in rows[2:]) + " |")
PY
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
digest uniform_034 uniform_430 zipf_034 dupnew_03
