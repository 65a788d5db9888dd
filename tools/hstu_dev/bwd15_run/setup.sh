# bwd15 / bwd16 run scripts' common setup, sourced by their run.sh / run2.sh from the root of main's tree: runlib's
# common.sh (the carry's where runlib/pack.sh put it there, else main's tree's: strict mode, OUT, the carry folder C
# (.carry/$NAME), left (seconds to the script's LIM, default 57), the branch's wheel in /tmp/site_$NAME and $MAIN's in
# /tmp/site_${NAME}_main, GPU (name and clocks), gpu_tests), T80 (main's time80.py; the cfgs are passed through).
# NAME defaults to bwd15, MAIN to main14 (session 14's scripts set neither).
NAME=${NAME:-bwd15}
MAIN=${MAIN:-main14}
BASE=$MAIN BASE_SITE=/tmp/site_${NAME}_main LIM=${LIM:-57}
RUNLIB_COMMON="$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -f "$RUNLIB_COMMON" ] || RUNLIB_COMMON=$PWD/tools/hstu_dev/runlib/common.sh
source "$RUNLIB_COMMON"
T80=$R/tools/hstu_dev/bwd80_run/time80.py
# The digest's test and timing parts (the end of stdout); $1: what the time columns mean.
digest_tests_time() {
  echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
  grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8
  grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
  echo "#### time80 (ms (TFLOP/s); $MAIN = main's wheel; $1)"
  grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-200
}
# ncu_profile TAG REGEX COUNT SCRIPT_ARGS...: ncu (speed of light, warp states, instruction stats) of the first COUNT
# kernels matching REGEX while $C/SCRIPT_ARGS runs with the branch's wheel, within the time left; $OUT/TAG.ncu-rep,
# ncu_raw.csv, ncu_digest.md (with --pairs N where the script prints "pairs N"), ncu_opcodes.csv.
ncu_profile() {
  local tag=$1 regex=$2 count=$3
  shift 3
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 6 ] || return 0
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) $ncu --clock-control none -k "regex:$regex" -c $count \
      --section SpeedOfLight --section WarpStateStats --section InstructionStats -o $OUT/$tag -f \
      python3 -P "$@" > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  local pairs
  pairs=$(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}')
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv ${pairs:+--pairs $pairs} > $OUT/ncu_digest.md 2>&1
  $ncu --import $OUT/$tag.ncu-rep --page raw --csv --print-metric-instances details \
      --metrics sass__inst_executed_per_opcode > $OUT/ncu_opcodes.csv 2>> $OUT/ncu.log
}
# bwd20: time_cfgs SECS CFG...: time80.py for the branch's cfgs + FA2 on the shapes of the array SH (time80's --only
# arguments), then $MAIN's wheel (cfg 0) in its own process for the time left, into $OUT/time.log.
time_cfgs() {
  local secs=$1
  shift
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $T80 $NAME --cfgs "$@" --fa2 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
  PYTHONPATH=/tmp/site_${NAME}_main timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $T80 $MAIN --cfgs 0 \
      --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
# bwd20: ncu_sources TAG COUNT SCRIPT_ARGS...: ncu source counters (+ warp states, instruction stats, occupancy) of the
# first COUNT backward kernels (ours or FA2's) while $C/SCRIPT_ARGS runs with the branch's wheel, within the time left;
# $OUT/TAG.ncu-rep, ncu_raw.csv, ncu_digest.md, TAG.csv.gz (the SASS source page), src_parts.md (by part, with the
# pairs the script prints).
ncu_sources() {
  local tag=$1 count=$2
  shift 2
  local ncu pairs
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 10 ] || return 0
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 6 )) $ncu --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c $count --section SourceCounters --section WarpStateStats \
      --section InstructionStats --section Occupancy --section LaunchStats \
      --metrics smsp__inst_executed.sum,gpu__time_duration.sum -o $OUT/$tag -f python3 -P "$@" > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  pairs=$(grep -o "pairs [0-9]*" $OUT/ncu.log | awk '{printf "%s ", $2}')
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs ${pairs%% *} > $OUT/ncu_digest.md 2>&1
  timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) $ncu --import $OUT/$tag.ncu-rep --page source --csv --print-source sass \
      > $OUT/$tag.csv 2>> $OUT/ncu.log
  python3 $C/src_parts.py $OUT/$tag.csv --pairs $pairs > $OUT/src_parts.md 2>&1
  gzip -f $OUT/$tag.csv
}
# bwd16: the GPU test files; time_vs_main SECS MAIN_SECS CFG...: time80.py for the branch's cfgs + FA2, then $MAIN's
# wheel (cfg 0), the causal D = 128 shapes, into $OUT/time.log; ncu_summary: the digest's ncu lines.
TF=tests/hstu/test_sm80_backward_gpu.py
TK=tests/hstu/test_kernels_gpu.py
time_vs_main() {
  local secs=$1 msecs=$2
  shift 2
  local sh=(--only "B16 S4K D128" S16K S1K)
  PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P $T80 $NAME --cfgs "$@" --fa2 --reps 5 "${sh[@]}" > $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
  PYTHONPATH=/tmp/site_${NAME}_main timeout $msecs python3 -P $T80 $MAIN --cfgs 0 --reps 5 "${sh[@]}" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
ncu_summary() {
  tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
  grep -E "inst_executed.sum |per warp and pair |issue_active.avg.pct_of_peak_sustained_active|pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch)|gpu__time" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
}
# default_path_tests SECS [NODE...]: bwd16's GPU tests of the sm80-class default path (+ NODE...): grid / phase order
# (the cfgs bitwise), which kernel runs, the context kernel, the key-block limit, sm80 vs the reference and the FA2
# layout vs the old default (second-round candidates and the reference at D = 128 only).
default_path_tests() {
  local secs=$1
  shift
  gpu_tests $secs $TF::test_sm80_backward_grid_and_phase_order $TF::test_sm80_backward_second_round_runs_its_kernel \
      "$@" $TK::test_sm80_and_sm90_kernels_agree_with_reference $TF::test_sm80_backward_refuses_too_many_key_blocks \
      $TF::test_sm80_backward_context_kernel $TK::test_sm80_backward_fa2_layout_matches_the_old_default \
      -k "not second_round[64 and not second_round[256 and not reference[64 and not reference[256"
}
