#!/bin/bash
# fp8b35 run 4 (issue 36, session 32; the lead's call 2): run 2's wheel (dq_rows = option bit 59, not the default).
# (1) the headline's benchmark at B16 S16K (--quick --reps 30 --no-dequant --variants main_path,dq_rows,default
# --short 30): a second process for dq_rows (slower in run 2); (2) ncu of one default call at B4 S16K (the pre-pass's
# two kernels, the e4m3 kernel, the finishing pass: speed of light, warp states, memory tables) -> $OUT/ncu.txt;
# (3) ncu of the dq_rows kernel alone (the same sections: its L2 reduce requests against the default's) ->
# $OUT/ncu_rows.txt.
# `OUT=DIR timeout 56 bash .carry/fp8b35/run4.sh` from the root of main's tree (carry: fp8b35_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
(cd $C/tree && PYTHONPATH=$S timeout $(( 18 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --quick --reps 30 \
    --no-dequant --variants main_path,dq_rows,default --short 30 > $OUT/bench.log 2>&1)
echo "bench rc $? ($SECONDS s)"
SECS="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats"
if [ -n "$NCU" ]; then
  PYTHONPATH=$S timeout $(( 40 - SECONDS )) $NCU --profile-from-start off --kernel-name regex:"fp8_|hstu_bwd_fp8" $SECS \
      python3 -P $C/ncu_call.py 4 16384 default > $OUT/ncu.txt 2>&1
  echo "ncu rc $? ($SECONDS s)"
  PYTHONPATH=$S timeout $(( 54 - SECONDS )) $NCU --profile-from-start off --kernel-name regex:"hstu_bwd_fp8" $SECS \
      python3 -P $C/ncu_call.py 4 16384 dq_rows > $OUT/ncu_rows.txt 2>&1
  echo "ncu rows rc $? ($SECONDS s)"
else
  echo "no ncu on this machine"
fi
echo "#### digest: $GPU"
grep "^| B\|^short\|rror" $OUT/bench.log | cut -c1-520
for f in ncu ncu_rows; do
  echo "## $f"
  grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|DRAM Throughput|L2 Cache Throughput|Registers Per|Warp Cycles Per Issued|Issued Warp" \
      $OUT/$f.txt 2> /dev/null | sed 's/  */ /g' | cut -c1-110 | head -36
done
echo "fp8b35 run 4 done at $SECONDS s"
