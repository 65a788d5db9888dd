#!/bin/bash
# rab35 (issue 39, session 32), run 1 (<= 50 s; main35's wheel only), from the root of main's tree:
#   OUT=/tmp/out_rab35 timeout 56 bash .carry/rab35/run1.sh
# Why main's portable forward with rab is 2.6x (D = 128) / 4.6x (D = 64) plain causal at bf16 B16 S4K H4:
# 1. ncu --set full of one launch each: D = 128 causal, rab (B, H, S, S); D = 64 causal, rab; the raw page digested
#    (ncu_digest.py + the global-load metrics below), the details page as text, the SASS source page by part
#    (src_parts.py: instructions and stall samples per part: global loads, MMA, ...).
# 2. time (the rest): D = 128 / 64 forward, causal, rab, rab1 (B, 1, S, S), CUDA graphs, interleaved.
LIM=50
source "$(dirname "$0")/setup.sh"
echo "== 1. ncu ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout 26 $NCU --clock-control none --set full -k regex:hstu_fwd --import-source no \
    -o $OUT/full -f python3 -P $J ncu --ncu --dims 128 64 --dirs fwd --cases causal rab > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/full.ncu-rep --page raw --csv --print-metric-instances values > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
$NCU --import $OUT/full.ncu-rep --page details > $OUT/ncu_details.txt 2>> $OUT/ncu.log
python3 $C/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
timeout 8 $NCU --import $OUT/full.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/ncu.log
python3 $C/src_parts.py $OUT/src.csv > $OUT/src_parts.md 2>&1
gzip -f $OUT/src.csv
echo "== 2. time ($SECONDS s)"
bench /tmp/site_main P1 $(( $(left) - 1 )) --reps 5 --dims 128 64 --dirs fwd --cases causal rab rab1
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (main35's wheel, sm90=False; ms (ratio to causal); rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (kernels: D128 causal, D128 rab, D64 causal, D64 rab)"
grep -E "gpu__time|inst_executed.sum |issue_active.avg.pct|hmma.*pct|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|dispatch|drain|tex)_|registers|dram__bytes_read|lts__t_bytes.sum|shared_mem_per_block|warps_active.avg.pct" \
    $OUT/ncu_digest.md 2>/dev/null | sed -E 's/ \([^|]*//g' | cut -c1-200
python3 - $OUT/ncu_raw.csv <<'PY' 2>&1 | head -16
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr, data = rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]
pat = re.compile(r"(l1tex__t_(sectors|requests)_pipe_lsu_mem_global_op_ld\.sum$|l1tex__t_sector_hit_rate\.pct$|"
                 r"lts__t_sectors_srcunit_tex_op_read\.sum$|l1tex__data_pipe_lsu_wavefronts_mem_global.*sum$|"
                 r"smsp__inst_executed_op_global_ld\.sum$|l1tex__lsu_writeback_active.*pct|"
                 r"sm__memory_throughput.avg.pct|l1tex__throughput.avg.pct|lts__throughput.avg.pct|"
                 r"local_(load|store).*sum$|smsp__sass_inst_executed_op_local)")
for i, h in enumerate(hdr):
    if pat.search(h):
        print(h[:70], "|", " | ".join(r[i].split(" (")[0] for r in data))
PY
grep -E "^### kernel|^\| (MMA|cp.async|FP32|int|conversions|control|ldmatrix) |^opcodes" $OUT/src_parts.md | cut -c1-230
tail -3 $OUT/ncu.log | cut -c1-200
