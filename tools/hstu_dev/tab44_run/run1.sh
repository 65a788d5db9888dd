#!/bin/bash
# tab44 (issue 39, session 41), run 1 (<= 125 s): issue 39's side-by-side table on main 037e70d6, from the tree's root:
#   OUT=/tmp/out_tab44 timeout 130 bash .carry/i39/run1.sh
# (carry: bash tools/hstu_dev/tab44_run/pack.sh DEST WHEEL PEER_SO)
# The eight shapes of RESULTS.md's table (dense, causal, H = 4, bf16): ours (the portable mma.sync kernels,
# kernel_options(sm90=False), what `benchmarks/hstu_attention.py --kernels portable` times) / FA2 (torch's flash SDPA
# backend) / the peer (NVIDIA's Ampere HSTU), forward and backward interleaved per direction in ONE process (L2
# flushed, median of 10 reps). Round 1 in the table's order; round 2 (where the time is left) in the reverse order, a
# second process, as a check on the first.
source "$(dirname "$0")/setup.sh"
python3 -c 'import torch,sys;print("torch", torch.__version__, "python", sys.version.split()[0])'
SHAPES="B16:S4096:D128 B16:S16384:D128 B128:S1024:D128 B16:S4096:D256 B16:S8192:D64 B256:S256:D256 B128:S1024:D256 B16:S8192:D256"
table() {  # table LOG TIMEOUT SHAPES...
  local log=$1 t=$2
  shift 2
  [ $t -gt 10 ] || { echo "no time left for $log"; return 0; }
  PYTHONPATH=/tmp/site_$NAME:$PEER timeout $t python3 -P $T39 table --bench $BENCH --variants main $PEER_ARG \
      --reps 10 --shapes "$@" > $OUT/$log 2>&1
  echo "rc $? ($log, $SECONDS s)"
}
echo "== round 1 ($SECONDS s)"
table table1.log $(( $(left) - 5 < 80 ? $(left) - 5 : 80 )) $SHAPES
echo "== round 2 ($SECONDS s)"
table table2.log $(( $(left) - 3 )) $(echo $SHAPES | tr ' ' '\n' | tac)
echo
echo "################ DIGEST ($GPU; $(nvidia-smi --query-gpu=temperature.gpu,power.draw --format=csv,noheader); done at $SECONDS s)"
echo "#### ours ms, FA2 / ours and peer / ours (> 1: ours faster); round 1 then round 2"
for f in $OUT/table1.log $OUT/table2.log; do
python3 - $f <<'PY'
import re, sys
for line in open(sys.argv[1]):
    if not line.startswith("TABLE"):
        continue
    s = line.split()[1]
    ours = {d: float(line.split(d + " main ")[1].split()[0]) for d in ("fwd", "bwd")}
    r = dict(re.findall(r"(\w+)/ours fwd ([\d.]+x)", line))
    rb = dict(re.findall(r"(\w+)/ours fwd [\d.]+x bwd ([\d.]+x)", line))
    print(f"{s:16s} fwd {ours['fwd']:.4f} fa2 {r.get('fa2', '-')} peer {r.get('peer', '-')} | bwd {ours['bwd']:.4f}"
          f" fa2 {rb.get('fa2', '-')} peer {rb.get('peer', '-')}")
PY
echo "--"
done
grep -hE "^####|peer n/a|no peer|Error|Traceback" $OUT/table1.log $OUT/table2.log | cut -c1-200 | head -6
