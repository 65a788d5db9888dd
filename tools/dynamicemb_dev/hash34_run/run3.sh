#!/bin/bash
# hash34 run 3 (issue 35, load 1.0; prepared, not run: the session's last device call went to changes that paid). Runs 1-2: the lean scan cut the insert pass's warp instructions 2.4-5.5 % and
# its time 0 to -1 %. Here A (eb_lab2 = 7e44ba4c: the lean scan, chunk loop not unrolled; lab value 3) against main's
# scan (lab value 1) once more in both orders and on Zipf, then ncu with source counters of find_or_insert's insert
# pass L1 / L3 (2^24 slots, 256K keys): the SASS page for sass_phases.py (stall samples by phase: what share of the
# pass the scan's ALU instructions hold, against its memory waits).
. .carry/hash34/common.sh
chmod +x $C/eb_lab2
eb2() { local name=$1 to=$2; shift 2; echo "## $name"; timeout $to $C/eb_lab2 "$@" 2>&1 | tee $OUT/$name.txt | grep -v "^keys"; }
eb2 A_uniform_13 9 26 20 5 - uniform 1 - 1,3
eb2 A_uniform_31 9 26 20 5 - uniform 1 - 3,1
eb2 A_zipf_13 10 26 20 5 - zipf 1 - 1,3
echo "timing: $(( $(date +%s) - t0 )) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout $(( $(left) - 8 )) $NCU --clock-control none --profile-from-start off -k "regex:upsert_insert_kernel" -c 2 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section SpeedOfLight \
  --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,gpu__time_duration.sum \
  -o /tmp/h34eb -f $C/eb_lab2 24 18 1 ncu uniform 1 - 1,3 > /tmp/h34ncu.log 2>&1
echo "ncu rc $? ($(( $(date +%s) - t0 )) s)"
tail -2 /tmp/h34ncu.log
$NCU --import /tmp/h34eb.ncu-rep --page raw --csv > $OUT/ncu_raw.csv 2>/dev/null
timeout $(left) $NCU --import /tmp/h34eb.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>/dev/null
echo "export rc $? ($(( $(date +%s) - t0 )) s)"
gzip -f $OUT/src.csv $OUT/ncu_raw.csv
digest A_uniform_13 A_uniform_31 A_zipf_13
