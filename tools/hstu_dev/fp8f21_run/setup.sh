# fp8f21 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree (4f9dd10): bwd15's
# (strict mode, OUT, C = .carry/fp8f21, left(), the branch's wheel in /tmp/site_fp8f21 and main20's in
# /tmp/site_fp8f21_main, gpu_tests SECONDS ARGS... on the branch's test files in $C/tree), fp8_fwd_run.sh's bench /
# ncu_profile ($C/fp8_fwd_split.py, $C/prof_fp8.py: the branch's copies), and smi_log / smi_stop: the GPU's SM
# clock, temperature, power (1 s average and instant, where this nvidia-smi has it) and throttle reasons every 50 ms
# into $OUT/smi.csv, summarized per case and per sustained window by $C/smi_digest.py (fp8f21: + J per call).
NAME=fp8f21 MAIN=main20
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader) ($SECONDS s)"
source $R/tools/hstu_dev/fp8_fwd_run.sh
SMI_PID=
smi_log() {
  local why= inst=
  nvidia-smi --query-gpu=power.draw.instant --format=csv,noheader > /dev/null 2>&1 && inst=,power.draw.instant
  for f in clocks_event_reasons.active clocks_throttle_reasons.active; do
    nvidia-smi --query-gpu=$f --format=csv,noheader > /dev/null 2>&1 && { why=,$f; break; }
  done
  echo "smi fields: timestamp,clocks.sm,temperature.gpu,power.draw$inst$why" > $OUT/smi.err
  nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw$inst$why --format=csv,noheader,nounits \
      -lms 50 > $OUT/smi.csv 2>> $OUT/smi.err &
  SMI_PID=$!
}
smi_stop() {
  [ -n "$SMI_PID" ] && kill $SMI_PID 2> /dev/null
  wait $SMI_PID 2> /dev/null
  SMI_PID=
  python3 $C/smi_digest.py $OUT/smi.csv $OUT/bench.log
}
# ncu21 TAG COUNT PROF_ARGS...: ncu (instruction stats + the pipes' instruction counts, L2 / DRAM bytes, cycles) of
# the first COUNT FP8 forward kernels of $C/prof_fp8.py PROF_ARGS with the branch's wheel, within the time left;
# $OUT/TAG.ncu-rep, ncu_raw.csv, and $C/ncu_count.py's table (per warp and tile pair, per score) on stdout.
ncu21() {
  local tag=$1 count=$2
  shift 2
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 6 ] || { echo "ncu skipped: $(left) s left"; return 0; }
  local m=smsp__inst_executed.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_fma.sum
  m=$m,smsp__inst_executed_pipe_fp16.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_uniform.sum
  m=$m,smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed_pipe_adu.sum,smsp__inst_executed_pipe_cbu.sum
  m=$m,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg
  m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) $ncu --clock-control none -k "regex:hstu_fwd_fp8_sm90_kernel" \
      -c $count $([ "${NCU_SECTIONS:-}" = none ] || echo --section InstructionStats) --metrics $m -o $OUT/$tag -f \
      python3 -P $C/prof_fp8.py "$@" \
      > $OUT/ncu.log 2>&1
  echo "ncu rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu_count.py $OUT/ncu_raw.csv 2>&1 | tee $OUT/ncu_count.md
}
