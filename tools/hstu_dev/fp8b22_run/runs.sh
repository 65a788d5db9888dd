#!/bin/bash
# fp8b22 (issue 36, session 21): its three device runs, `OUT=/tmp/o_fp8b22 bash .carry/fp8b22/runs.sh N` (N = 1, 2,
# 3; run.sh / run2.sh / run3.sh in the carry call it) from the root of main's tree (carry: bash
# tools/hstu_dev/fp8b22_run/pack.sh /work/main/.carry/fp8b22). One process (fp8b21's drive.py): GPU tests of
# tests/hstu/test_fp8_bwd.py first, then the random-order benchmark (benchmarks/hstu_fp8_bwd.py --no-dequant, the
# variants' names of the wheel that ran: docs/hstu_kernel_notes.md, "Session 21"); run 1 then ncu at B16 S16K.
N=${1:-3} NAME=fp8b22 BASE=main21
source "$(dirname "$0")/carry_setup.sh"  # (it sets the positional parameters: N first)
K=""
case $N in
  1) T=22 BENCH="--reps 30 --variants default,full_next,dq_bulk,full_next_dq_bulk"
     K="(kernel_matches_emulating and block and causal) or many_groups or (variant_matches_the_kernel and block and"
     K="$K (causal or local_context)) or (variant_matches_emulating and causal) or refuses_a_variant" ;;
  2) T=37 BENCH="--reps 30 --variants default,main_kernel,dq_bulk,dq_bulk_late" ;;
  *) T=26 BENCH="--reps 20 --variants default" ;;
esac
echo "GPU: $GPU, run $N ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $T python3 -P tools/drive.py --tests-first --no-dequant $BENCH \
   -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py ${K:+-k "$K"} \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-420
if [ "$N" = 1 ]; then  # ncu of the kernel at S16K, the default then dq_bulk, exported for the digests off the device
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  PYTHONPATH=/tmp/site_$NAME timeout $(( 39 - SECONDS )) $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel" \
      -c 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats \
      -o $OUT/fp8k -f python3 -P $C/tree/tools/ncu_case.py 16384 16384:dq_bulk > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  if [ -f $OUT/fp8k.ncu-rep ]; then
    timeout 4 $NCU --import $OUT/fp8k.ncu-rep --page raw --csv --print-metric-instances values > $OUT/raw.csv
    timeout 4 $NCU --import $OUT/fp8k.ncu-rep --page source --csv --print-source sass > $OUT/src.csv
    gzip -f $OUT/src.csv $OUT/raw.csv
  fi
fi
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
