# The FP8 forward run scripts' helpers (sourced by fp8f17_run / fp8f18_run's setup.sh after bwd15's setup: OUT, R, C,
# NAME, left()).
# bench SECONDS ARGS...: $C/fp8_fwd_split.py with the branch's wheel (variants interleaved in one process).
bench() {
  local secs=$1
  shift
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $C/fp8_fwd_split.py "$@" > $OUT/bench.log 2>&1
  echo "bench rc $? ($SECONDS s)"
  grep -E "^\||rror" $OUT/bench.log
}
# ncu_profile TAG COUNT PROF_ARGS...: ncu of the first COUNT FP8 forward kernels of $PROF (default $C/prof_fp8.py; fp8f17_run's
# prof_fp8.py takes D:var ...) with the branch's wheel, within the time left; $OUT/TAG.ncu-rep, ncu_raw.csv,
# ncu_digest.md (bwd15_run/ncu_digest.py), ncu_details.txt (pipe utilization, warp states), the pipes' instruction
# counts (XU, FMA, FP16, ALU) on stdout.
ncu_profile() {
  local tag=$1 count=$2
  shift 2
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 8 ] || { echo "ncu skipped: $(left) s left"; return 0; }
  local pipes=smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_fp16.sum
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) $ncu --clock-control none -k "regex:hstu_fwd_fp8_sm90_kernel" \
      -c $count --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
      --metrics $pipes,smsp__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_uniform.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
      -o $OUT/$tag -f python3 -P ${PROF:-$C/prof_fp8.py} "$@" > $OUT/ncu.log 2>&1
  echo "ncu rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $R/tools/hstu_dev/bwd15_run/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
  $ncu --import $OUT/$tag.ncu-rep --page details > $OUT/ncu_details.txt 2>> $OUT/ncu.log
  grep -E "gpu__time|issue_active.avg.pct|pipe_tensor|pipe_xu|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch|sleeping|membar|lg)|wavefronts_mem_shared" \
      $OUT/ncu_digest.md 2>/dev/null | cut -c1-220
  grep -h -o -E "smsp__inst_executed_pipe_(xu|fma|fp16|alu)\.sum[^,]*" $OUT/ncu_raw.csv 2>/dev/null | head -4
}
