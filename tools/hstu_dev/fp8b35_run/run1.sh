#!/bin/bash
# fp8b35 run 1 (issue 36, session 32): main35's path measured, no branch wheel (pack.sh --no-wheel). (1) The headline's
# benchmark (--reps 50 --no-dequant --variants main_path,default) with the common short method beside it in the same
# process (--short 30: 30 back-to-back calls after 5 warm-up ones, mean); (2) one profiled call of the default and of
# main_path at B16 S16K (path_ab.py: each kernel's start and length, us); (3) ncu of one call at B4 S16K
# (the pre-pass's two kernels, the e4m3 kernel, the finishing pass: speed of light, warp states, scheduler,
# occupancy, memory), its text in $OUT/ncu.txt.
# `OUT=DIR timeout 56 bash .carry/fp8b35/run1.sh` from the root of main's tree (carry: fp8b35_run/pack.sh --no-wheel).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_main
(cd $C/tree && PYTHONPATH=$S timeout $(( 26 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 \
    --no-dequant --variants main_path,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 36 - SECONDS )) python3 -P $C/path_ab.py op main_path > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
if [ -n "$NCU" ]; then
  PYTHONPATH=$S timeout $(( 53 - SECONDS )) $NCU --profile-from-start off --target-processes all \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
      --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      python3 -P $C/ncu_call.py 4 16384 default > $OUT/ncu.txt 2>&1
  echo "ncu rc $? ($SECONDS s)"
else
  echo "no ncu on this machine"
fi
echo "#### digest: $GPU"
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-420
cut -c1-700 $OUT/path_ab.log | grep -v Warn | tail -3
grep -E "^  [a-z_]+.*fp8|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Ipc|No Eligible|One or More" $OUT/ncu.txt 2> /dev/null | head -44 | cut -c1-150
echo "fp8b35 run 1 done at $SECONDS s"
