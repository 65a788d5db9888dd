# fp8f17 run scripts' common setup, sourced by run.sh / run2.sh / run3.sh from the root of main's tree: bwd15's (OUT,
# the carry folder C = .carry/fp8f17, left() (seconds to LIM, default 57), the branch's wheel in /tmp/site_fp8f17 and
# main's (.carry/main16) in /tmp/site_fp8f17_main, gpu_tests), the GPU's name and clocks, and the helpers below.
NAME=fp8f17 MAIN=main16
# (strict mode, OUT, R, C, left(), both wheels installed, gpu_tests SECONDS PYTEST_ARGS...)
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader) ($SECONDS s)"
# gpu_tests_sharded SECONDS SHARD...: the branch's test files in parallel processes (one per SHARD, a quoted list of
# pytest arguments), each -v into $OUT/tests_N.log. (Run 3: seven shards starved each other, 4 tests passed in 22 s
# where one process passes ~15 in 9 s: cap each process's CPU threads, or run one process.)
gpu_tests_sharded() {
  local secs=$1 n=0
  shift
  local pids=()
  for shard in "$@"; do
    n=$((n + 1))
    (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
        --import-mode=importlib --tb=short -rfE $shard > $OUT/tests_$n.log 2>&1) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait $pid; done
  echo "tests ($SECONDS s): $(cat $OUT/tests_*.log | grep -c PASSED) passed, $(cat $OUT/tests_*.log | grep -c -E 'FAILED|ERROR') failed lines"
  for f in $OUT/tests_*.log; do echo "$(basename $f): $(tail -1 $f)"; done
  grep -h -E "^FAILED|^ERROR" $OUT/tests_*.log | head -8
}
# bench SECONDS ARGS...: fp8_fwd_split.py with the branch's wheel (variants interleaved in one process), then
# main's wheel, default only, in its own process (its clocks differ: compare variants inside one process).
bench() {
  local secs=$1
  shift
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $C/fp8_fwd_split.py "$@" > $OUT/bench.log 2>&1
  echo "bench rc $? ($SECONDS s)"
  grep -E "^\||rror" $OUT/bench.log
}
bench_main() {
  local secs=$1
  shift
  PYTHONPATH=/tmp/site_${NAME}_main timeout $secs python3 -P $C/fp8_fwd_split.py --default-only "$@" > $OUT/bench_main.log 2>&1
  echo "main's wheel rc $? ($SECONDS s)"
  grep -E "^\| B|rror" $OUT/bench_main.log
}
# ncu_profile TAG COUNT PROF_ARGS...: ncu of the first COUNT FP8 forward kernels of prof_fp8.py PROF_ARGS (branch's
# wheel) within the time left; $OUT/TAG.ncu-rep, ncu_raw.csv, ncu_digest.md (bwd15_run/ncu_digest.py), ncu_details.txt.
ncu_profile() {
  local tag=$1 count=$2
  shift 2
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 8 ] || { echo "ncu skipped: $(left) s left"; return 0; }
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) $ncu --clock-control none -k "regex:hstu_fwd_fp8_sm90_kernel" \
      -c $count --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
      --metrics smsp__inst_executed_pipe_xu.sum,sm__inst_executed_pipe_uniform.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
      -o $OUT/$tag -f python3 -P $C/prof_fp8.py "$@" > $OUT/ncu.log 2>&1
  echo "ncu rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $R/tools/hstu_dev/bwd15_run/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
  $ncu --import $OUT/$tag.ncu-rep --page details > $OUT/ncu_details.txt 2>> $OUT/ncu.log
  grep -E "gpu__time|issue_active.avg.pct|pipe_tensor|pipe_xu|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch|sleeping|membar|lg)|wavefronts_mem_shared" \
      $OUT/ncu_digest.md 2>/dev/null | cut -c1-220
}
