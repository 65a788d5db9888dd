#!/bin/bash
# bwd35 (issue 39, session 32), run 1 (<= 50 s), from the root of main's tree:
#   OUT=/tmp/out_bwd35 timeout 56 bash .carry/bwd35/run1.sh
# (carry: bash tools/hstu_dev/bwd35_run/pack.sh /work/main/.carry/bwd35 --no-wheel: main35's wheel only)
# Where main's portable backward spends its time at B128 S1K D128 (heads first, one-barrier loop) and B16 S4K D256:
# 1. ncu --set full of one main-kernel launch and its dQ convert per shape (clocks not locked), the raw page digested
#    (ncu_digest.py), the details page as text, the SASS source page by part (src_parts.py, per warp and pair)
# 2. torch.profiler (the time left): every kernel of one backward (ours, FA2) with its device time
LIM=50
source "$(dirname "$0")/setup.sh"
echo "== 1. ncu ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout $(( $(left) - 20 )) $NCU --clock-control none --set full -k "regex:hstu_bwd_pds|hstu_dq_tile_convert" \
    -c 4 --import-source no -o $OUT/full -f python3 -P $B21 ncu --impls ours \
    --shapes B128:S1024:D128 B16:S4096:D256 > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/full.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
    > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
$NCU --import $OUT/full.ncu-rep --page details > $OUT/ncu_details.txt 2>> $OUT/ncu.log
# kernels: main D128, its convert, main D256, its convert; pairs: (64 x 128) at D = 128; (64 x 64) at D = 256 (twice bwd21's count)
P1=$(grep -o "pairs [0-9]*" $OUT/ncu.log | sed -n 1p | awk '{print $2}')
P2=$(grep -o "pairs [0-9]*" $OUT/ncu.log | sed -n 2p | awk '{print $2}')
python3 $C/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) $NCU --import $OUT/full.ncu-rep --page source --csv --print-source sass \
    > $OUT/src.csv 2>> $OUT/ncu.log
python3 $C/src_parts.py $OUT/src.csv --pairs ${P1:-0} 0 $(( 2 * ${P2:-0} )) 0 > $OUT/src_parts.md 2>&1
gzip -f $OUT/src.csv
echo "== 2. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout $(( $(left) > 4 ? $(left) - 1 : 2 )) python3 -P $B21 prof --impls ours fa2 \
    --shapes B128:S1024:D128 B16:S4096:D256 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### prof (ms)"
grep -E "^#### prof|^  " $OUT/prof.log | cut -c1-110 | head -24
echo "#### ncu (main35; B128 S1K D128 pairs $P1 (64x128), B16 S4K D256 pairs $((2 * ${P2:-0})) (64x64))"
grep -E "gpu__time|inst_executed.sum |issue_active.avg.pct|hmma.*pct|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|dispatch)_|bank_conflicts|wavefronts_mem_shared.sum|sm__cycles_active.(min|max|avg)|dram__bytes_(read|write)" \
    $OUT/ncu_digest.md 2>/dev/null | cut -c1-160
tail -2 $OUT/ncu.log | cut -c1-200
ls -la $OUT | tail -8
