#!/bin/bash
# bwd26 (issue 39, session 23), run 3 (<= 45 s), from the root of main's tree:
#   OUT=/tmp/o_bwd26 timeout 56 bash .carry/bwd26/run3.sh > /tmp/o_bwd26/stdout.txt 2>&1
# Wheel: run 2's (the default at D = 256: one barrier on mbarriers + lean copies; cfg 1 main's two-barrier kernels).
# 1. ncu (stalls per issued instruction, instructions, tensor pipe) of one backward's main kernel, the default and cfg
#    1, B16 S4K D256 (133,120 (64 x 64) tile pairs, 8 warps)
# 2. time: main26's wheel in its own process against the branch's default (each its own process)
LIM=45
source "$(dirname "$0")/setup.sh"
echo "== 1. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for s in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle not_selected \
    membar sleeping branch_resolving no_instruction dispatch_stall; do
  M=$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
PYTHONPATH=/tmp/site_$NAME timeout 24 $NCU --clock-control none -k regex:hstu_bwd_pds -c 2 --metrics $M --csv \
    --page raw python3 -P $B21 ncu --cfgs 0 1 --impls ours --shapes B16:S4096:D256 > $OUT/ncu.csv 2> $OUT/ncu.err
echo "rc $? ($SECONDS s)"
echo "== 2. time ($SECONDS s)"
for site in /tmp/site_${NAME}_main /tmp/site_$NAME; do
  [ $(left) -gt 4 ] && PYTHONPATH=$site timeout $(( $(left) > 9 ? 8 : $(left) - 1 )) python3 -P $B21 time \
      --label $(basename $site) --cfgs 0 --reps 5 --impls ours --shapes B16:S4096:D256 B128:S1024:D256 >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
done
echo > $OUT/tests.log
digest "each wheel's cfg 0 in its own process: site_bwd26_main = main26, site_bwd26 = the branch"
echo "#### ncu (cfg 0 then cfg 1)"
python3 - $OUT/ncu.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((r for r in rows if "Kernel Name" in r), None)
if hdr is None:
    print(open(sys.argv[1]).read()[-1500:]); sys.exit()
data = [r for r in rows[rows.index(hdr) + 1:] if len(r) == len(hdr) and r[hdr.index("Kernel Name")].startswith(("hstu", "void"))]
for r in data:
    d = dict(zip(hdr, r))
    inst = float(d["smsp__inst_executed.sum"].replace(",", ""))
    print(d["Kernel Name"][:70], "| us", d["gpu__time_duration.sum"], "| inst / warp-pair %.0f" % (inst / (133120 * 8)),
          "| hmma %", d["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"])
    print("   ", " ".join("%s %s" % (k.split("stalled_")[1].split("_per_issue")[0], v) for k, v in d.items() if "stalled_" in k))
PY
