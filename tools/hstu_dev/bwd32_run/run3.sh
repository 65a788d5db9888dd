#!/bin/bash
# bwd32 (issue 39, session 29), run 3 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd32 timeout 56 bash .carry/bwd32/run3.sh > /tmp/o_bwd32/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd32_run/pack.sh /work/main/.carry/bwd32; run 1's wheel)
# 1. time (the flip's second run; cfg 15's too): cfg 0 / 13 / 15 / FA2 at B16 S8K / S4K D64 (batch first), B128 S1K
#    D64 (heads first + tail), median of 9, interleaved
# 2. ncu at B16 S8K D64 (the default, FA2; one launch each): why ours leads FA2 by 20 % at B2 S8K under ncu (run 2:
#    634 / 760 us) but by 5 % at B16: DRAM bytes, L2 hit rate, SM active cycles min / max / mean, issue and
#    tensor-pipe activity, stalls
LIM=49 NAME=bwd32 BASE=main32
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 20 python3 -P $B21 time --label $NAME --cfgs 0 13 15 --reps 9 --impls ours fa2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B128:S1024:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 5 ? $(left) - 4 : 1 )) $NCU --clock-control none \
    -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c 2 --section SpeedOfLight --section WarpStateStats \
    --section LaunchStats --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,gpu__time_duration.sum,smsp__inst_executed_op_global_red.sum \
    -o $OUT/b16_32 -f python3 -P $C/prof17.py --batch 16 --runs 64:8192:0 64:8192:fa2 > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/b16_32.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
    > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs $(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}') \
    > $OUT/ncu_digest.md 2>&1
digest "cfg 0 = the default (running pointers + lane offsets once); 13 = main's loop; 15 = 0 + dQ split over keys"
echo "#### ncu (B16 S8K D64; the default, then FA2; per warp and (64 x 128) pair)"
grep -E "^\| metric|inst_executed.sum |per warp and pair |issue_active.avg.pct|pipe_tensor.*pct|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|drain|membar)|gpu__time|dram__bytes|lts__t_sector_hit|sm__cycles_active|red.sum|registers|waves" \
    $OUT/ncu_digest.md 2>/dev/null | cut -c1-220
tail -2 $OUT/ncu.log | cut -c1-200
