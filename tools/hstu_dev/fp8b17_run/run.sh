#!/bin/bash
# fp8b17 (issue 36, session 16), run 1 (<= 57 s), from the root of main's tree (main d8b2e85 on the device):
#   OUT=/tmp/o_fp8b17 timeout 75 bash .carry/fp8b17/run.sh > /tmp/o_fp8b17/stdout.txt 2>&1
# Why the FP8 backward loses to the bf16 one (causal H4 D128 B16, block descale). The branch's wheel: its diag 0 is
# main's kernel (SASS identical), same-math variants (hstu_bwd_fp8_sm90.h): 256 kFp8BwdStageFirst (dQ staged before
# dK is issued, not under it), 512 kFp8BwdGuessU (no quantization multiply), 1024 kFp8BwdStsmDs8 (dS8 by
# stmatrix.trans), 1536 both; 2048 kFp8BwdSpecQ (dS' quantized in its own iteration, kept in registers: no fp32
# parking; rare second roundings), 3072 with stmatrix dS8.
# 1. GPU tests: the variants against the kernel (dk / dv bit-equal, dq one bf16 rounding; 2048 / 3072: close;
#    block descale, 5 masks), the diag list, 2048 / 3072 against the fp64 emulation (causal)
# 2. ncu at S4K: the FP8 kernel and the bf16 kernel (speed of light, workloads, warp states, scheduler, instruction
#    stats, source counters)
# 3. split: the op alone, diag 0 / 256 / 512 / 1024 / 1536 / 2048 / 3072 / 1 (no dQ staging) / 16 (staged, no
#    reduce-adds), S16K and S4K
# 4. per-kernel breakdown (torch.profiler) of one FP8 backward and one bf16 backward at S4K and S16K
# 5. ncu at S16K (both kernels, speed of light, compute, warp states), if time is left
LIM=58 WITH_MAIN=0 source "$(dirname "$0")/setup.sh"
export PYTHONPATH=/tmp/site_fp8b17
echo "== 1. GPU tests ($SECONDS s)"
(cd $C/tree && timeout 14 python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short -rfE \
    tests/hstu/test_fp8_bwd.py -k "(variant_matches and block) or diag_not_built or (close_variant and block and causal)" > $OUT/tests.log 2>&1)
echo "rc $? ($SECONDS s)"
echo "== 2. ncu S4K ($SECONDS s)"
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --section LaunchStats --section SourceCounters"
if [ "$(left)" -gt 8 ]; then
  timeout 20 $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel|hstu_bwd_sm90_kernel" \
      -c 2 $SECS -o $OUT/s4k -f python3 -P $C/prof17.py ncu 4096 > $OUT/ncu_s4k.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/s4k.ncu-rep --print-kernel-base function --page raw --csv --print-metric-instances values \
      > $OUT/s4k_raw.csv 2>> $OUT/ncu_s4k.log
  $NCU --import $OUT/s4k.ncu-rep --page source --csv --print-source sass > $OUT/s4k_source.csv 2>> $OUT/ncu_s4k.log
  echo "exports ($SECONDS s)"
fi
echo "== 3. split ($SECONDS s)"
timeout 9 python3 -P $C/fp8_bwd_split.py --reps 5 --diags 0,256,512,1024,1536,2048,3072,1,16 > $OUT/split.md 2>&1
echo "rc $? ($SECONDS s)"
echo "== 4. breakdown ($SECONDS s)"
timeout 9 python3 -P $C/prof17.py breakdown 4096 16384 > $OUT/breakdown.md 2>&1
echo "rc $? ($SECONDS s)"
echo "== 5. ncu S16K ($SECONDS s)"
if [ "$(left)" -gt 9 ]; then
  timeout $(( $(left) - 1 )) $NCU --clock-control none -k "regex:hstu_bwd_fp8_sm90_kernel|hstu_bwd_sm90_kernel" \
      -c 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      -o $OUT/s16k -f python3 -P $C/prof17.py ncu 16384 > $OUT/ncu_s16k.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/s16k.ncu-rep --print-kernel-base function --page raw --csv --print-metric-instances values \
      > $OUT/s16k_raw.csv 2>> $OUT/ncu_s16k.log
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests $OUT/tests.log
digest_tables "split (op alone, ms)" $OUT/split.md
digest_tables "breakdown" $OUT/breakdown.md
for t in s4k s16k; do
  echo "#### ncu $t (kernels: FP8, bf16)"
  tail -2 $OUT/ncu_$t.log 2>/dev/null | cut -c1-200
  [ -f $OUT/${t}_raw.csv ] && python3 $R/tools/hstu_dev/bwd15_run/ncu_digest.py $OUT/${t}_raw.csv 2>&1 | cut -c1-200 \
      | grep -E "metric|---|gpu__time|issue_active|inst_executed|tensor|stalled_(wait|short|long|barrier|math|mio|lg|not_sel|dispatch|branch|sleep|membar|tex)|eligible|shared|registers" | head -45
done
echo "#### source counters (S4K): in $OUT/s4k_source.csv; top lines:"
[ -f $OUT/s4k_source.csv ] && python3 $C/src_digest.py $OUT/s4k_source.csv 25 2>&1 | cut -c1-220 | head -70
