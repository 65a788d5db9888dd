#!/bin/bash
# bwd41 (issue 39, session 38), run 1 (<= 52 s), from the root of main's tree:
#   OUT=/tmp/out_bwd41 timeout 56 bash .carry/bwd41/run1.sh
# The branch's wheel: D = 128's default three-stage loop = the dQ-first body with the lane offsets once (no spills);
# bwd_sm80_cfg=14 = main's loop (SASS-identical to main d7a8eec6's), 13 = main's loop with the lane offsets once.
# 1. tests: the new loop against cfgs 13 / 14 (error rule, kernel names, dK / dV / drab bitwise), the kernels each
#    cfg runs, stmatrix / pointer-copy cfgs (now on main's loop) bitwise the default, rab (main's loop), dQ claims
# 2. timing, one process, interleaved, L2 flushed: main (the default) / c14 / c13 / FA2; bf16 causal H4
# 3. ncu (if time is left): the default's loop, main's loop and FA2's dq_dk_dv at B4 S16K D128
# Everything comes back as one tar ($OUT/bwd41_run1.tgz); the DIGEST last.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
F="tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py"
run_tests 14 "d128_loop_cfgs or (runs_its_kernel and 128) or (stsm_pds and 128)" $F
if [ $(left) -gt 40 ]; then run_tests $(( $(left) - 33 )) "(rab_smem and 128) or (dq_claims and bf16-128)" $F; fi
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 12 )) python3 -P $T41 time --bench $R/benchmarks \
    --variants main c14 c13 --reps 7 --rounds 2 --shapes B16:S16384:D128 B128:S1024:D128 B16:S4096:D128 \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active
if [ -n "$NCU" ] && [ $(left) -gt 9 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) $NCU --clock-control none \
      -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" --section WarpStateStats --metrics $M \
      -o $OUT/d128 -f python3 -P $T41 ncu --bench $R/benchmarks --variants main c14 fa2 --shapes B4:S16384:D128 \
      > $OUT/ncu_d128.log 2>&1
  echo "ncu rc $? ($SECONDS s)"
  [ -f $OUT/d128.ncu-rep ] && timeout 2 $NCU --import $OUT/d128.ncu-rep --page raw --csv > $OUT/ncu_d128.csv \
      2>> $OUT/ncu_d128.log
fi
tar czf $OUT/bwd41_run1.tgz -C $OUT --exclude bwd41_run1.tgz --exclude "*.ncu-rep" . 2>/dev/null
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### ncu B4 S16K D128 (per warp and 64 x 128 pair; stalls per issue)"
[ -f $OUT/ncu_d128.csv ] && python3 $C/ncu_line.py $OUT/ncu_d128.csv 2>&1 | cut -c1-150 | head -4
echo "#### bwd ms (median of 7, best of 2 rounds): default / c14 (main's loop) / c13 / FA2"
grep -E "^B" $OUT/time.log | sed -E 's/ \| at .*//; s/ +/ /g' | cut -c1-190
grep -E "rror|Traceback" $OUT/time.log | cut -c1-150 | head -2
echo "#### tests"
digest_tests | cut -c1-160 | tail -6; digest_progress
