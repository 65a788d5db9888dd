# fp8f18 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree (d901835): bwd15's
# (strict mode, OUT, C = .carry/fp8f18, left() (seconds to LIM), the branch's wheel in /tmp/site_fp8f18 and main17's
# in /tmp/site_fp8f18_main, gpu_tests SECONDS PYTEST_ARGS... on the branch's test files in $C/tree), then bench.
NAME=fp8f18 MAIN=main17
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader) ($SECONDS s)"
# bench SECONDS ARGS...: the branch's fp8_fwd_split.py with the branch's wheel (variants interleaved in one process).
bench() {
  local secs=$1
  shift
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $C/fp8_fwd_split.py "$@" > $OUT/bench.log 2>&1
  echo "bench rc $? ($SECONDS s)"
  grep -E "^\||rror" $OUT/bench.log
}
# ncu_profile TAG COUNT PROF_ARGS...: ncu of the first COUNT FP8 forward kernels of main's
# tools/hstu_dev/fp8f17_run/prof_fp8.py PROF_ARGS (D:var ...; the branch's wheel) within the time left:
# $OUT/TAG.ncu-rep, ncu_digest.md, ncu_details.txt (pipe utilization per pipe, warp states).
ncu_profile() {
  local tag=$1 count=$2
  shift 2
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 8 ] || { echo "ncu skipped: $(left) s left"; return 0; }
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) $ncu --clock-control none -k "regex:hstu_fwd_fp8_sm90_kernel" \
      -c $count --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section InstructionStats \
      --metrics smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_fp16.sum,smsp__inst_executed_pipe_alu.sum \
      -o $OUT/$tag -f python3 -P $R/tools/hstu_dev/fp8f17_run/prof_fp8.py "$@" > $OUT/ncu.log 2>&1
  echo "ncu rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $R/tools/hstu_dev/bwd15_run/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
  $ncu --import $OUT/$tag.ncu-rep --page details > $OUT/ncu_details.txt 2>> $OUT/ncu.log
  grep -E "gpu__time|issue_active.avg.pct|pipe_tensor|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch)" \
      $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
  grep -E "inst_executed_pipe_(xu|fma|fp16|alu)" $OUT/ncu_raw.csv > /dev/null 2>&1 && python3 - $OUT/ncu_raw.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1]))); hdr = rows[0]
for i, h in enumerate(hdr):
    if "inst_executed_pipe_" in h:
        print("|", h, "|", " | ".join(r[i] for r in rows[2:] if len(r) == len(hdr)), "|")
PY
}
