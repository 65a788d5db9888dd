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
# bench_main SECONDS ARGS...: main's wheel, default only, in its own process (its clocks differ: compare variants
# inside one process); bench: tools/hstu_dev/fp8_fwd_run.sh.
bench_main() {
  local secs=$1
  shift
  PYTHONPATH=/tmp/site_${NAME}_main timeout $secs python3 -P $C/fp8_fwd_split.py --default-only "$@" > $OUT/bench_main.log 2>&1
  echo "main's wheel rc $? ($SECONDS s)"
  grep -E "^\| B|rror" $OUT/bench_main.log
}
# ncu_profile TAG COUNT PROF_ARGS...: tools/hstu_dev/fp8_fwd_run.sh ($C/prof_fp8.py).
source $R/tools/hstu_dev/fp8_fwd_run.sh
