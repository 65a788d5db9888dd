# bwd21's run scripts' common part, sourced from the root of main's tree on the device: strict mode, OUT, the carry
# folder C, left() (seconds to LIM), the branch's wheel in /tmp/site_bwd21, PP (that site + the NVIDIA Ampere peer's
# module, .carry/peer), GPU, gpu_tests SECS PYTEST_ARGS..., ncu_main TAG REGEX COUNT SCRIPT_ARGS...
set -u
export PYTHONUNBUFFERED=1
NAME=bwd21
OUT=${OUT:-/tmp/o_$NAME}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/$NAME
left() { echo $((${LIM:-42} - SECONDS)); }
rm -rf /tmp/site_$NAME
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_$NAME $C/whl/hstu_attn-*.whl 2>&1 \
    | grep -v WARN | tail -2
PP=/tmp/site_$NAME:$R/.carry/peer
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
TF=tests/hstu/test_sm80_backward_gpu.py
TK=tests/hstu/test_kernels_gpu.py
# gpu_tests SECS PYTEST_ARGS...: the branch's tests (its files in $C/tree) with the branch's wheel, -v, into
# $OUT/tests.log; prints a summary line.
gpu_tests() {
  local secs=$1
  shift
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout $secs python3 -P -m pytest -v -p no:cacheprovider \
      --import-mode=importlib --tb=short --maxfail=3 -rfE "$@" > $OUT/tests.log 2>&1)
  echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
}
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
      --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,gpu__time_duration.sum,smsp__inst_executed_op_global_red.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
      -o $OUT/$tag -f python3 -P $C/bwd21.py ncu "$@" > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  pairs=$(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}')
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv ${pairs:+--pairs $pairs} > $OUT/ncu_digest.md 2>&1
}
