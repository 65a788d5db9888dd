# fwd30 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: the common carry setup
# (carry_setup.sh, carried beside this file: main30's hstu_attn wheel in /tmp/site_main, the branch's, where carried,
# in /tmp/site_fwd30; GPU, run_tests, digest_tests), J = fwd21_bench.py (its --ncu mode; carried in jag/ beside
# fwd17_jag.py), B = fwd30_bench.py, left (seconds left of the run's 48), ncu_case.
NAME=${NAME:-fwd30} BASE=${BASE:-main30}
source "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh
J=$C/jag/fwd21_bench.py
B=$C/jag/fwd30_bench.py
T=tests/hstu/test_sm80_forward_gpu.py
left() { echo $(( 48 - SECONDS )); }
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
# ncu_case TAG SITE COUNT REGEX ARGS...: ncu (speed of light, the pipes, warp states, scheduler, instruction stats,
# occupancy, source counters) of the first COUNT kernels matching REGEX while fwd21_bench.py (NCU_J: another script
# with the same --ncu mode) --ncu ARGS runs with SITE's wheel (time left less 7 s), then the raw page (csv,
# bwd15_run's digest) and the source page with SASS (csv.gz, digested off the device) of the report; NCU_LIGHT=1:
# the pipes and warp states only, no source page (fewer passes)
ncu_case() {
  local tag=$1 site=$2 count=$3 re=$4 m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active p
  shift 4
  [ -n "$NCU" ] && [ $(left) -gt 12 ] || { echo "no ncu or no time left for $tag"; return 0; }
  for p in xu fma alu lsu; do m=$m,sm__inst_executed_pipe_$p.avg.pct_of_peak_sustained_active; done
  m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
  local sec="SpeedOfLight ComputeWorkloadAnalysis WarpStateStats SchedulerStats InstructionStats Occupancy LaunchStats"
  [ "${NCU_LIGHT:-0}" = 1 ] && sec="ComputeWorkloadAnalysis WarpStateStats" || sec="$sec SourceCounters"
  PYTHONPATH=$site timeout $(( $(left) - 7 )) $NCU --clock-control none -k "regex:$re" -c $count \
      $(printf -- "--section %s " $sec) --metrics $m \
      -o $OUT/$tag -f python3 -P ${NCU_J:-$J} ncu --ncu "$@" > $OUT/ncu_$tag.log 2>&1
  echo "rc $? (ncu $tag, $SECONDS s)"
  timeout 3 $NCU --import $OUT/$tag.ncu-rep --page raw --csv --print-metric-instances values \
      > $OUT/${tag}_raw.csv 2>> $OUT/ncu_$tag.log
  python3 $C/ncu_digest.py $OUT/${tag}_raw.csv > $OUT/${tag}_digest.md 2>&1
  [ "${NCU_LIGHT:-0}" = 1 ] ||
    timeout 3 $NCU --import $OUT/$tag.ncu-rep --page source --csv --print-source sass 2>> $OUT/ncu_$tag.log |
    gzip > $OUT/${tag}_src.csv.gz
  echo "exports done ($SECONDS s)"
}
