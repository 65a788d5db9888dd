# bwd21's run scripts' common part, sourced from the root of main's tree on the device: bwd15's setup (setup15.sh in
# the carry folder: strict mode, OUT, C, left(), the branch's wheel in /tmp/site_bwd21 and main20's, GPU, TF, TK,
# gpu_tests), then PP (that site + the NVIDIA Ampere peer's module, .carry/peer) and ncu_main TAG REGEX COUNT
# SCRIPT_ARGS...
NAME=bwd21 MAIN=main20
S15="$(dirname "${BASH_SOURCE[0]}")/setup15.sh"
[ -f "$S15" ] || S15="$(dirname "${BASH_SOURCE[0]}")/../bwd15_run/setup.sh"
source "$S15"
PP=/tmp/site_$NAME:$R/.carry/peer
# ncu_main TAG REGEX COUNT SCRIPT_ARGS...: ncu (speed of light, warp states, instruction stats, memory, occupancy,
# the SMs' active cycles min / max) of the first COUNT kernels matching REGEX while bwd21.py SCRIPT_ARGS runs, within
# the time left; $OUT/TAG.ncu-rep, ncu_raw.csv, ncu_digest.md (per warp and pair with the pairs bwd21.py prints).
ncu_main() {
  local tag=$1 regex=$2 count=$3
  shift 3
  local ncu pairs
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 8 ] || return 0
  PYTHONPATH=$PP timeout $(( $(left) - 4 )) $ncu --clock-control none -k "regex:$regex" -c $count \
      --section SpeedOfLight --section WarpStateStats --section InstructionStats --section Occupancy \
      --section LaunchStats --section MemoryWorkloadAnalysis \
      --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,gpu__time_duration.sum,smsp__inst_executed_op_global_red.sum \
      -o $OUT/$tag -f python3 -P $C/bwd21.py ncu "$@" > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  pairs=$(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}')
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv ${pairs:+--pairs $pairs} > $OUT/ncu_digest.md 2>&1
}
