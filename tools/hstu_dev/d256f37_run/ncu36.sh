# ncu36 TAG SITE COUNT REGEX ARGS...: the pipes, warp states, shared-memory wavefronts / bank conflicts, L2 / DRAM
# bytes and hit rate, the SMs' active cycles, one launch each of d256_bench.py --ncu ARGS (time left less 4 s)
ncu36() {
  local tag=$1 site=$2 count=$3 re=$4 m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active p
  shift 4
  [ -n "$NCU" ] && [ $(left) -gt 10 ] || { echo "no ncu or no time left for $tag"; return 0; }
  for p in xu fma alu lsu; do m=$m,sm__inst_executed_pipe_$p.avg.pct_of_peak_sustained_active; done
  m=$m,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
  m=$m,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed
  m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
  m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
  m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.min,sm__cycles_active.max
  m=$m,sm__cycles_active.avg,launch__registers_per_thread
  PYTHONPATH=$site timeout $(( $(left) - 4 )) $NCU --clock-control none -k "regex:$re" -c $count \
      --section WarpStateStats --metrics $m \
      -o $OUT/$tag -f python3 -P $J ncu --ncu "$@" > $OUT/ncu_$tag.log 2>&1
  echo "rc $? (ncu $tag, $SECONDS s)"
  timeout 3 $NCU --import $OUT/$tag.ncu-rep --page raw --csv --print-metric-instances values \
      > $OUT/${tag}_raw.csv 2>> $OUT/ncu_$tag.log
  python3 $C/ncu_digest.py $OUT/${tag}_raw.csv > $OUT/${tag}_digest.md 2>&1
  echo "exports done ($SECONDS s)"
}
# ncu_grep TAG: the digest's lines of interest
ncu_grep() {
  grep -E "^ncu:|rror|Traceback" $OUT/ncu_$1.log 2>/dev/null | tail -4 | cut -c1-200
  grep -E "gpu__time|hmma_cycles_active.avg.pct|dram__bytes_(read|write)|lts__t_bytes.sum|sector_hit_rate|\
lts__throughput|wavefronts_mem_shared|bank_conflicts|stalled_(wait|short|long|barrier|mio|not_sel|math).*ratio|\
smsp__inst_executed.sum|sm__cycles_active|registers" $OUT/$1_digest.md 2>/dev/null | cut -c1-200
}
