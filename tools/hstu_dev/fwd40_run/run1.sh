#!/bin/bash
# fwd40 (issue 39, session 37), run 1 (<= 52 s), from the root of main's tree, main40's wheel only (no product change):
#   OUT=/tmp/out_fwd40 timeout 56 bash .carry/fwd40/run1.sh
# 1. B128 S1K D128 and B256 S256 D256 (the two shapes under 1.1x FA2): the default, fwd_sm80_cfg 1 / 2 / 5 / 6 / 7
#    and FA2, each timed three ways in one process (t40.py: ev = the table's L2-flushed single calls, two rounds;
#    graph = 10 calls back to back in a CUDA graph; kern = the profiler's kernel durations): is the loss since
#    session 32 inside the kernel or around it, and does another existing tile win at short rows?
# 2. the default against FA2 along constant tokens (B x S = 128K, D128: S256 .. S4K; D256 S1K, S512): where the ratio
#    falls with S
# 3. ncu (if time is left): ours and FA2's forward kernel at B128 S1K D128, one launch each
source "$(dirname "$0")/setup.sh"
echo "GPU: $GPU $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader)"
echo "== 1. variants ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout 24 python3 -P $T40 table --bench $R/benchmarks --reps 10 \
    --variants main c1 c2 c5 c6 c7 --var-shapes B128:S1024:D128 B256:S256:D256 \
    --shapes B128:S1024:D128 B256:S256:D256 > $OUT/t1.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. sweep ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout $(( $(left) - 14 )) python3 -P $T40 table --bench $R/benchmarks --reps 8 \
    --no-prof --variants main --shapes B512:S256:D128 B256:S512:D128 B64:S2048:D128 B32:S4096:D128 \
    B128:S1024:D256 B256:S512:D256 > $OUT/t2.log 2>&1
echo "rc $? ($SECONDS s)"
M=gpu__time_duration.sum,sm__cycles_active.avg,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active
M=$M,launch__registers_per_thread,launch__occupancy_limit_registers,sm__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,dram__bytes_read.sum,smsp__warp_issue_stalled_barrier_per_warp_active.pct
M=$M,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
if [ -n "$NCU" ] && [ $(left) -gt 9 ]; then
  PYTHONPATH=/tmp/site_main timeout $(( $(left) - 1 )) $NCU --clock-control none -k "regex:hstu_fwd|flash_fwd" \
      --metrics $M --csv python3 -P $T40 ncu --bench $R/benchmarks --variants main fa2 --shapes B128:S1024:D128 \
      > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "rc $? (ncu, $SECONDS s)"
fi
SMI=$(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader)
echo "################ DIGEST ($GPU; $SMI; done at $SECONDS s)"
python3 $C/dig40.py $OUT/t1.log $OUT/t2.log $OUT/ncu.csv | cut -c1-330
