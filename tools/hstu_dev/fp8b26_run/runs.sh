#!/bin/bash
# fp8b26 (issue 36, session 23): its device runs, `OUT=/tmp/o_fp8b26 bash .carry/fp8b26/runs.sh N` (N = 1, 2, 3;
# run.sh / run2.sh / run3.sh in the carry call it) from the root of main's tree (carry: bash
# tools/hstu_dev/fp8b26_run/pack.sh /work/main/.carry/fp8b26). One process (fp8b21's drive.py): the whole
# tests/hstu/test_fp8_bwd.py first, then the random-order benchmark (benchmarks/hstu_fp8_bwd.py --no-dequant) with
# the wheel's variants (run 1: park_da, park_red5, park_red5_dp: the kept dS8 words in shared memory, 3 / 5 / 5 of
# dQ's reduce-adds held for the next tile's S^T; run 2: early_factors, early_park5_dp, early_park5: the tile's q / dO
# factor words read before the GEMMs' issue, alone and with the parking; run 3: the final wheel, early_factors in the
# default, main_kernel its option bit 59 (main df4a8c3's kernel); docs/hstu_kernel_notes.md, "Session 23");
# then, in the time left (runs 1-2), ncu of the kernel at B16 S4K (the default, then the variant $NV if time allows),
# exported for the digests off the device (tools/hstu_dev/fp8b21_run/raw_digest.py, src_digest.py).
N=${1:-1} NAME=fp8b26 BASE=main26
source "$(dirname "$0")/carry_setup.sh"  # (it sets the positional parameters: N first)
case $N in
  1) T=32 BENCH="--reps 30 --variants default,park_da,park_red5,park_red5_dp" NV=park_red5 ;;
  2) T=32 BENCH="--reps 30 --variants default,early_factors,early_park5_dp,early_park5" NV=early_factors ;;
  *) T=28 BENCH="--reps 50 --variants main_kernel,default,main_kernel" ;;
esac
source "$(dirname "$0")/fp8_bwd_drive_run.sh"
if [ "$N" = 3 ]; then  # the kernel alone at B16 S16K: the new default, then main's (SpeedOfLight: time and cycles)
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  L=$(( 45 - SECONDS ))
  echo "ncu: $L s"
  if [ $L -gt 8 ]; then
    PYTHONPATH=/tmp/site_$NAME timeout $L $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel" -c 2 \
        --section SpeedOfLight --section LaunchStats -o $OUT/fp8k -f python3 -P $C/tree/tools/ncu_case.py 16384 \
        16384:main_kernel > $OUT/ncu.log 2>&1
    echo "ncu rc $? ($SECONDS s)"
    tail -3 $OUT/ncu.log | cut -c1-200
    [ -f $OUT/fp8k.ncu-rep ] && timeout $(( 50 - SECONDS > 2 ? 50 - SECONDS : 2 )) $NCU --import $OUT/fp8k.ncu-rep \
        --page raw --csv --print-metric-instances values > $OUT/raw.csv && gzip -f $OUT/raw.csv
  fi
fi
if [ "$N" -le 2 ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  L=$(( 45 - SECONDS ))
  CASES="4096 4096:$NV"
  [ $L -lt 13 ] && CASES=4096
  echo "ncu: $L s for $CASES"
  if [ $L -gt 6 ]; then
    PYTHONPATH=/tmp/site_$NAME timeout $L $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel" -c 2 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
        --section LaunchStats -o $OUT/fp8k -f python3 -P $C/tree/tools/ncu_case.py $CASES > $OUT/ncu.log 2>&1
    echo "ncu rc $? ($SECONDS s)"
    tail -3 $OUT/ncu.log | cut -c1-200
    if [ -f $OUT/fp8k.ncu-rep ]; then
      timeout 3 $NCU --import $OUT/fp8k.ncu-rep --page raw --csv --print-metric-instances values > $OUT/raw.csv
      timeout $(( 50 - SECONDS > 2 ? 50 - SECONDS : 2 )) $NCU --import $OUT/fp8k.ncu-rep --page source --csv \
        --print-source sass > $OUT/src.csv
      echo "exports rc $? ($SECONDS s)"
      gzip -f $OUT/src.csv $OUT/raw.csv
      [ $(stat -c %s $OUT/fp8k.ncu-rep) -gt 20000000 ] && rm -f $OUT/fp8k.ncu-rep
    fi
  fi
fi
echo "fp8b26 run $N done at $SECONDS s"
