#!/bin/bash
# fwd17 (issue 39, session 16), run 1 (<= 45 s), from the root of main's tree (main d8b2e85 on the device):
#   OUT=/tmp/o_fwd17 timeout 75 bash .carry/fwd17/run.sh > /tmp/o_fwd17/stdout.txt 2>&1
# Counts where the portable forward's jagged Zipf batch (D256 ctx3) loses against dense same-token batches, with
# main16's wheel (kernel_options(sm90=False)):
# 1. fwd17_jag.py: the Zipf batch, its parts (longest sequence alone, two longest, the rest, sorted longest first,
#    no contexts), dense same-token batches, D128; B256 S256 / B64 S1K D256 vs FA2; ctx64 vs causal at S4K
# 2. ncu (one launch each): Zipf D256 ctx3, dense B2 S1820 ctx3, B16 S4K causal, ctx64, B256 S256; FA2 B256 S256:
#    time, grid, SM active cycles avg / max / min over elapsed (the balance), instructions, tensor pipe
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_fwd17_main timeout 20 python3 -P $J main16 --cfgs 0 2 6 --reps 7 --parts --short --fa2 \
    --masks > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
left=$((56 - SECONDS))
if [ "$left" -gt 10 ]; then
  PYTHONPATH=/tmp/site_fwd17_main timeout $((left - 4)) $NCU --clock-control none -k "regex:hstu_fwd_kernel|flash_fwd" \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      -o $OUT/prof17 -f python3 -P $C/prof17.py 0 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  ncu_digest $OUT/prof17.ncu-rep > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (main16 = main d8b2e85's wheel, sm90=False; cfg 0 the default (D256: warp pairs), 2, 6 old tiles)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (Zipf D256 ctx3, dense B2 S1820 ctx3, B16 S4K causal, ctx64, B256 S256, FA2 B256 S256)"
tail -2 $OUT/ncu.log | cut -c1-300; cut -c1-400 $OUT/ncu_digest.md 2>/dev/null | head -20
