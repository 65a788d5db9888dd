# fwd21 run scripts' common setup, sourced by run.sh / run2.sh from the root of main's tree: main20's wheel against
# the branch's (tools/hstu_dev/carry_setup.sh, carried beside this file), J = fwd21_bench.py (carried with
# fwd17_jag.py in jag/), the peer's module on PYTHONPATH (.carry/peer), ncu_profile. (fwd22's setup.sh sets NAME and
# BASE first.)
NAME=${NAME:-fwd21} BASE=${BASE:-main20}
for f in "$(dirname "${BASH_SOURCE[0]}")"/carry_setup.sh "$(dirname "${BASH_SOURCE[0]}")"/../carry_setup.sh; do
  [ -f "$f" ] && source "$f" && break
done
J=$C/jag/fwd21_bench.py
PEER=$R/.carry/peer
left() { echo $(( 41 - SECONDS )); }
# jagp SITE LABEL TIMEOUT ARGS...: jag with the peer's module on the path
jagp() {
  local site=$1 label=$2 t=$3
  shift 3
  [ $t -gt 1 ] || { echo "no time left for $label"; return 0; }
  PYTHONPATH=$site:$PEER timeout $t python3 -P $J $label "$@" >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
}
# ncu_profile TAG COUNT ARGS...: ncu (speed of light, compute workload (the pipes), warp states, instruction stats,
# occupancy) of the first COUNT forward kernels (ours: hstu_fwd_kernel, hstu_fwd_qreg_kernel; the peer's:
# hstu_fwd_kernel; FA2's: flash_fwd_kernel) while fwd21_bench.py --ncu ARGS runs with the branch's wheel, within the
# time left; digest in $OUT/ncu_digest.md (tools/hstu_dev/bwd15_run/ncu_digest.py, carried)
ncu_profile() {
  local tag=$1 count=$2
  shift 2
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ $(left) -gt 8 ] || { echo "no time left for ncu"; return 0; }
  local m=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active p
  for p in xu fma alu lsu; do m=$m,sm__inst_executed_pipe_$p.avg.pct_of_peak_sustained_active; done
  m=$m,dram__bytes.sum,lts__t_bytes.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
  m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
  PYTHONPATH=/tmp/site_$NAME:$PEER timeout $(( $(left) - 2 )) $ncu --clock-control none \
      -k "regex:hstu_fwd_(qreg_)?kernel|flash_fwd_kernel" -c $count --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section Occupancy \
      --section LaunchStats --metrics $m -o $OUT/$tag -f python3 -P $J ncu --ncu "$@" > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $ncu --import $OUT/$tag.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
}
# digest_verbose: the PASSED tests per test function of a -v run, then digest_tests
digest_verbose() {
  grep -c PASSED $OUT/tests.log | sed 's/^/PASSED lines: /'
  grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
  digest_tests
}
