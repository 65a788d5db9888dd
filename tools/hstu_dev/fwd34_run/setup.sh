# fwd34 run scripts' setup, sourced by runK.sh from the root of main's tree on the device: fwd30_run's setup (carried
# here as setup30.sh beside carry_setup.sh, ncu_digest.py and jag/: main's wheel in /tmp/site_main, the branch's in
# /tmp/site_fwd34, GPU, run_tests, digest_tests, left, ncu_case) with J = fwd34_bench.py (variants default, ve =
# kernel_options(fwd_sm80_bm64=1), vep = fwd_sm80_bm64=2; jag SITE LABEL TIMEOUT ARGS appends its tables to
# $OUT/time.log).
NAME=fwd34 BASE=${BASE:-main34}
source "$(dirname "${BASH_SOURCE[0]}")"/setup30.sh
J=$C/jag/fwd34_bench.py
# ncu34 TAG SITE COUNT REGEX ARGS...: setup30.sh's ncu_case (NCU_LIGHT: the pipes and warp states) with the memory
# side added: DRAM bytes read / written, the L2 hit rate, DRAM throughput, the SMs' active cycles
ncu34() {
  local tag=$1 site=$2 count=$3 re=$4 m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active p
  shift 4
  [ -n "$NCU" ] && [ $(left) -gt 12 ] || { echo "no ncu or no time left for $tag"; return 0; }
  for p in xu fma alu lsu; do m=$m,sm__inst_executed_pipe_$p.avg.pct_of_peak_sustained_active; done
  m=$m,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
  m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.min,sm__cycles_active.max
  m=$m,sm__cycles_active.avg
  PYTHONPATH=$site timeout $(( $(left) - 5 )) $NCU --clock-control none -k "regex:$re" -c $count \
      --section ComputeWorkloadAnalysis --section WarpStateStats --metrics $m \
      -o $OUT/$tag -f python3 -P $J ncu --ncu "$@" > $OUT/ncu_$tag.log 2>&1
  echo "rc $? (ncu $tag, $SECONDS s)"
  timeout 3 $NCU --import $OUT/$tag.ncu-rep --page raw --csv --print-metric-instances values \
      > $OUT/${tag}_raw.csv 2>> $OUT/ncu_$tag.log
  python3 $C/ncu_digest.py $OUT/${tag}_raw.csv > $OUT/${tag}_digest.md 2>&1
  echo "exports done ($SECONDS s)"
}
