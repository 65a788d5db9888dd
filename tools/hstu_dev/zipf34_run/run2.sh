#!/bin/bash
# zipf34 (issue 39, session 31), run 2 (<= 45 s; run 1's wheel), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/zipf34/run2.sh > <dir>/stdout.txt 2>&1
# 0. Tests: run 1's failed test_sm80_forward_split_long_walk with chunks of 250 KV tiles (300 passed
#    kernel_options' bound of 253): a 66,000-key sequence, the list's walks past its histogram and cache, the lean
#    list against main's bit for bit; and the sync test again (the lean list against main's in a CUDA graph).
# 1. ncu of the split's list kernel, the branch's (default) against main's (fwd_sm80_split_plain=True), on the Zipf
#    batch and its dense twin at D = 64 (4 launches: the second round of zipf34_ncu.py): duration, instructions, warp
#    stalls (bwd15's digest of the raw page), caches and clocks left alone.
# 2. main34's wheel (main 39ee30ed, its default) in its own process: Zipf / dense at D = 64 / 128 / 256 and the
#    per-call timeline, beside run 1's branch numbers.
source "$(dirname "$0")/setup.sh"
echo "== 0. GPU tests ($SECONDS s)"
run_tests 12 "long_walk or split_sync" -v $T
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "== 1. ncu ($SECONDS s; $NCU)"
sec="SpeedOfLight WarpStateStats InstructionStats LaunchStats"
PYTHONPATH=/tmp/site_zipf34 timeout 18 $NCU --clock-control none --cache-control none \
  -k "regex:hstu_sm80_fwd_list_kernel" -s 4 -c 4 $(printf -- "--section %s " $sec) \
  -o $OUT/z34 -f python3 -P $C/jag/zipf34_ncu.py > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
timeout 3 $NCU --import $OUT/z34.ncu-rep --page raw --csv --print-metric-instances values > $OUT/z34_raw.csv \
  2>> $OUT/ncu.log
python3 $C/jag/ncu_digest.py $OUT/z34_raw.csv > $OUT/z34_digest.md 2>&1
echo "== 2. main34 ($SECONDS s)"
bench ${BASE_SITE:-/tmp/site_main} main34 $(( $(left) + 4 )) ratio gaps --base --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'long_walk or split_sync')"
digest_verbose
echo "#### ncu, the list kernel at D64 (launches: Zipf lean, Zipf main, dense lean, dense main)"
grep -E "^ncu:|rror|==PROF==|Traceback|done" $OUT/ncu.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|inst_executed.sum |issue_active.avg.pct|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch|lg_throttle|membar|drain|branch|no_inst).*ratio" \
  $OUT/z34_digest.md 2>/dev/null | cut -c1-220
digest_time
