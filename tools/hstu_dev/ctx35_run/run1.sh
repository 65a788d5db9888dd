#!/bin/bash
# ctx35 (issue 39, session 32), run 1 (<= 50 s; main35's wheel only), from the root of main's tree:
#   OUT=/tmp/out_ctx35 timeout 56 bash .carry/ctx35/run1.sh
# Main's portable kernels (sm90=False), bf16 B16 S4K H4, the masks against plain causal, forward and backward:
# contexts 64 (ctx0: a num_contexts of zeros), targets 256, both, rab (B, H, S, S) and rab1 (B, 1, S, S) (backward:
# without / with drab). causal@1 / ctx64@1: the same calls on a second set of inputs (another placement), so a
# ratio's spread between processes can be told apart from the inputs' addresses. Processes: P1 (D = 128, 64, 256,
# forward and backward), P2 (the cases in the reverse order), then ncu of one forward each (D = 128: causal, ctx0,
# ctx64; instructions, HMMAs, cycles), then P3 / P4 (D = 128 forward only) in the time left. nvidia-smi logs the SM
# clock every 100 ms.
source "$(dirname "$0")/setup.sh"
F="causal ctx64 ctx0 tgt256 ctx64tgt256 rab rab1 causal@1 ctx64@1"
BW="causal ctx64 tgt256 ctx64tgt256 rab rabd rab1d causal@1 ctx64@1"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
echo "== 1. time ($SECONDS s)"
bench /tmp/site_main P1 14 --reps 5 --dims 128 64 256 --cases $F --bwd-cases $BW
bench /tmp/site_main P2 14 --reps 5 --dims 128 64 256 --cases $(rev $F) --bwd-cases $(rev $BW)
echo "== 2. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor_op_hmma.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,smsp__cycles_active.avg,lts__t_bytes.sum,dram__bytes_read.sum,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,launch__grid_size,launch__registers_per_thread
if [ -n "$NCU" ] && [ $(left) -gt 14 ]; then
  PYTHONPATH=/tmp/site_main timeout 11 $NCU --clock-control none -k regex:hstu_fwd --metrics $M --csv \
      python3 -P $J ncu --ncu --dims 128 --dirs fwd --cases causal ctx0 ctx64 > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "rc $? (ncu, $SECONDS s)"
fi
echo "== 3. time, D = 128 forward ($SECONDS s)"
bench /tmp/site_main P3 $(( $(left) / 2 )) --reps 7 --dims 128 --dirs fwd --cases $F
bench /tmp/site_main P4 $(left) --reps 7 --dims 128 --dirs fwd --cases $(rev $F)
smi_stop
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
smi_digest
echo "#### time (main35's wheel, sm90=False; ms (ratio to the same inputs' causal); @1 = second input set;"
echo "#### rab (B,H,S,S) / rab1 (B,1,S,S) bf16, rabd = bwd with drab)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-330
echo "#### ncu (D128 fwd: causal, ctx0, ctx64)"
python3 - $OUT/ncu.csv <<'PY' 2>&1 | head -12
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
ii = head.index("ID")
out = {}
for r in rows[1:]:
    out.setdefault((r[ii], r[ki][:40]), {})[r[mi].replace("smsp__average_warp_latency_issue_stalled_", "st_")
                                             .replace("smsp__inst_executed", "inst")] = r[vi]
for (i, k), m in out.items():
    print(i, k, " ".join(f"{a}={b}" for a, b in sorted(m.items())))
PY
