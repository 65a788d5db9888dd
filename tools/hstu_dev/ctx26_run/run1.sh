#!/bin/bash
# ctx26 (issue 39, session 23), run 1 (<= 48 s; main's wheel only, no branch wheel), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/ctx26/run1.sh > <dir>/stdout.txt 2>&1
# What a context call's extra cost is made of, before building anything (main's default kernels): B16 S4K H4 bf16 at
# D = 64 / 128, causal against 0 (a num_contexts tensor of zeros: the context kernel, tile 0 walking only its causal
# keys), 32 (one busy warp in tile 0's extra steps), 64 (two), 128 (all four) contexts, ctx64 with cfg 3 (no skip)
# and cfg 4 (Q from shared memory); the same at B2 (one wave: the walks' critical path); then ncu (speed of light,
# memory, warp states) of one causal and one ctx64 forward per head dim (is the L2 / load path near its bound?).
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
bench /tmp/site_main main26 22 --reps 5 --dims 64 128 --batches 16 2 \
    --cases causal ctx0 ctx32 ctx64 ctx128 ctx64:3 ctx64:4
echo "== 2. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes.sum
if [ -n "$NCU" ] && [ $(left) -gt 10 ]; then
  PYTHONPATH=/tmp/site_main timeout $(( $(left) - 4 )) $NCU --clock-control none -k regex:hstu_fwd_qreg -c 4 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --metrics $M \
      -o $OUT/ncu_ctx26 -f python3 -P $J ncu --ncu --dims 128 64 --cases causal ctx64 > $OUT/ncu.log 2>&1
  echo "rc $? (ncu, $SECONDS s)"
  timeout 3 $NCU --import $OUT/ncu_ctx26.ncu-rep --page details > $OUT/ncu.txt 2>&1
  timeout 3 $NCU --import $OUT/ncu_ctx26.ncu-rep --page raw --csv > $OUT/ncu_raw.csv 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (main26 = main df4a8c3's wheel; cases: causal, ctxN = N contexts per sequence (ctx0: zeros), :c ="
echo "#### fwd_sm80_cfg c (default 0); sm90=False)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
echo "#### ncu (kernel order: D128 causal, ctx64, D64 causal, ctx64)"
grep -E "hstu_fwd_qreg|Duration|Throughput|Hit Rate|Mem Busy|Max Bandwidth|Mem Pipes|Warp Cycles Per Issued|rror" \
    $OUT/ncu.txt 2>/dev/null | sed -E 's/ +/ /g' | cut -c1-160 | head -60
python3 - "$OUT/ncu_raw.csv" <<'PY' 2>&1 | head -40
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
want = [i for i, h in enumerate(head) if h in ("Kernel Name", "gpu__time_duration.sum", "lts__t_bytes.sum",
        "dram__bytes.sum", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")
        or (h.startswith("smsp__average_warp_latency_issue_stalled_") and h.endswith(".ratio"))
        or (h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio"))]
for r in rows[2:]:
    print(" | ".join(f"{head[i].replace('smsp__average_warps_issue_stalled_', 'st_')[:40]}={r[i][:40]}" for i in want
                     if r[i] not in ("", "0", "0.00")))
PY
