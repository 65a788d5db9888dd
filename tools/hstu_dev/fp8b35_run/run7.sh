#!/bin/bash
# fp8b35 run 7 (issue 36, session 32; the lead's last helper call): run 5's wheel (the pre-pass's instruction cuts in
# the default; option bit 59 main_prepass = main a9b26580's two pre-pass kernels; profiled -5 us / 0 us in run 5).
# (1) the headline's benchmark at B16 S16K (--quick --reps 40 --no-dequant --variants main_prepass,main_path,default
# --short 30): a second process; (2) ncu of the two pre-pass kernels at B16 S16K, the default's and main_prepass's
# (speed of light, occupancy, scheduler, warp states, compute pipes): what limits them, if not their issue slots.
# `OUT=DIR timeout 56 bash .carry/fp8b35/run7.sh` from the root of main's tree (carry: fp8b35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
(cd $C/tree && PYTHONPATH=$S timeout $(( 22 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 40 \
    --no-dequant --variants main_prepass,main_path,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
SECS="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats"
SECS="$SECS --section ComputeWorkloadAnalysis"
if [ -n "$NCU" ]; then
  for vl in default:38 main_prepass:54; do
    v=${vl%:*}
    PYTHONPATH=$S timeout $(( ${vl#*:} - SECONDS )) $NCU --profile-from-start off \
        --kernel-name regex:"fp8_quant|fp8_transpose" $SECS python3 -P $C/ncu_call.py 16 16384 $v > $OUT/ncu_$v.txt 2>&1
    echo "ncu $v rc $? ($SECONDS s)"
  done
fi
echo "#### digest: $GPU"
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
for v in default main_prepass; do
  echo "## $v"
  grep -E "^  [a-zA-Z_].*\(|Duration|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|One or More Eligible|Active Warps Per Scheduler|Eligible Warps Per|Warp Cycles Per Issued|Executed Ipc Active" \
      $OUT/ncu_$v.txt 2> /dev/null | sed 's/  */ /g' | cut -c1-90 | head -24
done
echo "fp8b35 run 7 done at $SECONDS s"
