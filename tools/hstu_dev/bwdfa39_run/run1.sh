#!/bin/bash
# bwdfa39 (issue 39, session 36), run 1 (<= 52 s), from the root of main's tree:
#   OUT=/tmp/out_bwdfa39 timeout 56 bash .carry/bwdfa39/run1.sh
# (carry: bash tools/hstu_dev/bwdfa39_run/pack.sh /work/main/.carry/bwdfa39; no wheel of the branch: main39's)
# 1. table: issue 39's eight shapes, ours (main39's portable kernels) / FA2 / the peer (NVIDIA's Ampere HSTU, peer35's
#    module), forward and backward interleaved in one process; kernel profiles of one backward at B16 S16K D128 and
#    B16 S8K D64 (ours, FA2, the peer)
# 2. ncu: our backward loop against FA2's at B4 S16K D128 (and B4 S8K D64 if time is left): stalls, issue slots,
#    tensor pipe, L2 / DRAM bytes, reductions, instruction classes
LIM=52
source "$(dirname "$0")/setup.sh"
python3 -c 'import torch,sys;print("torch", torch.__version__, "python", sys.version.split()[0])'
echo "== 1. table ($SECONDS s)"
PYTHONPATH=/tmp/site_main:$PEER timeout 28 python3 -P $T39 table --bench $R/benchmarks --variants main $PEER_ARG \
    --reps 10 --shapes B16:S4096:D128 B16:S16384:D128 B128:S1024:D128 B16:S4096:D256 B16:S8192:D64 \
    B256:S256:D256 B128:S1024:D256 B16:S8192:D256 --prof-shapes B16:S16384:D128 B16:S8192:D64 > $OUT/table.log 2>&1
echo "rc $? ($SECONDS s)"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_red.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum
M=$M,smsp__inst_executed.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
M=$M,smsp__inst_executed_op_global_red.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__cycles_elapsed.avg
# ncu_loops TAG VARIANTS SHAPE: the loop kernels (ours, FA2's dq_dk_dv) of one backward each, raw page as csv
ncu_loops() {
  local tag=$1 vars=$2 shp=$3
  [ -n "$NCU" ] && [ $(left) -gt 8 ] || return 0
  PYTHONPATH=/tmp/site_main timeout $(( $(left) - 3 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" --section WarpStateStats --section InstructionStats --metrics $M -o $OUT/$tag -f \
      python3 -P $T39 ncu --bench $R/benchmarks --variants $vars --shapes $shp > $OUT/ncu_$tag.log 2>&1
  echo "ncu $tag rc $? ($SECONDS s)"
  [ -f $OUT/$tag.ncu-rep ] && timeout 3 $NCU --import $OUT/$tag.ncu-rep --page raw --csv > $OUT/ncu_$tag.csv \
      2>> $OUT/ncu_$tag.log
}
echo "== 2. ncu ($SECONDS s)"
ncu_loops d128 "main fa2" B4:S16384:D128
ncu_loops d64 "main fa2" B4:S8192:D64
echo "#### prof (us)"
grep -E "^####|^ " $OUT/table.log | grep -v "^#### table" | cut -c1-110 | head -40
echo "#### ncu"
python3 $C/ncu_digest.py $OUT/ncu_d128.csv $OUT/ncu_d64.csv 2>&1 | cut -c1-400 | head -40
tail -1 $OUT/ncu_d128.log $OUT/ncu_d64.log 2>/dev/null | cut -c1-200
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### table: ours ms (main39 --kernels portable), FA2 / ours and peer / ours (> 1: ours faster)"
python3 - $OUT/table.log <<'PY'
import re, sys
for line in open(sys.argv[1]):
    if not line.startswith("TABLE"):
        continue
    f = line.split()
    s = f[1]
    ours = {d: float(line.split(d + " main ")[1].split()[0]) for d in ("fwd", "bwd")}
    r = dict(re.findall(r"(\w+)/ours fwd ([\d.]+x)", line))
    rb = dict(re.findall(r"(\w+)/ours fwd [\d.]+x bwd ([\d.]+x)", line))
    print(f"{s:16s} fwd {ours['fwd']:.3f} fa2 {r.get('fa2', '-')} peer {r.get('peer', '-')} | bwd {ours['bwd']:.3f}"
          f" fa2 {rb.get('fa2', '-')} peer {rb.get('peer', '-')}")
PY
grep -E "peer n/a|Error" $OUT/table.log | cut -c1-150 | head -3
