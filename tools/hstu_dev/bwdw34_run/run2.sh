#!/bin/bash
# bwdw34 (issue 39, session 31), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/out_bwdw34 timeout 56 bash .carry/bwdw34/run2.sh
# (carry: bash tools/hstu_dev/bwdw34_run/pack.sh /work/main/.carry/bwdw34)
# Wheel of 827c8fab: D = 256's sm_90+ default with S / dP split over the head dim across warp pairs (kPdsKSplitS, both
# dtypes); cfg 13 at D = 256 = the loop without it (main's default loop, its template arguments and code).
# 1. time: cfg 13 / 0 / FA2 (cfg 13 first: the other column place than run 1) at B16 S4K D256 (batch first) and B128
#    S1K D256 (heads first), median of 7, interleaved
# 2. GPU tests, D = 256: the split against the loop without it (both orders), batch first (cfgs 13 / 6 bitwise the
#    two-barrier kernel's), the kernel each cfg runs (bf16, fp16), the loop test (every cfg), the tail order, the smem
#    epilogue, the dQ workspace layouts (bf16, fp16), test_kernels_gpu's default kernel name
# 3. compute-sanitizer racecheck of the default's heads-first kernel on two sequences
# 4. ncu at B16 S4K D256 (cfg 0, cfg 13; one launch each) in the time left
LIM=49 NAME=bwdw34 BASE=main34
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $B21 time --label $NAME --cfgs 13 0 --reps 7 \
    --impls ours fa2 --shapes B16:S4096:D256 B128:S1024:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
gpu_tests $(( $(left) > 30 ? $(left) - 18 : 10 )) $T::test_sm80_backward_ksplit $T::test_sm80_backward_mbar_batch_first \
    $T::test_sm80_backward_one_barrier_runs_its_kernel $K::test_sm80_backward_candidate_runs_its_kernel \
    $T::test_sm80_backward_one_barrier $T::test_sm80_backward_tail_blocks_first \
    $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_dq_workspace_layouts -k "ksplit or mbar or 256"
echo "== 3. racecheck ($SECONDS s)"
if [ $(left) -gt 4 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 14 ? 10 : $(left) - 2 )) $CS --tool racecheck \
      --kernel-name regex=Li33770E python3 -P $C/racecase34.py > $OUT/san.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/san.log
fi
echo "== 4. ncu ($SECONDS s)"
if [ $(left) -gt 6 ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 2 )) $NCU --clock-control none -k "regex:hstu_bwd_pds" -c 2 \
      --metrics smsp__inst_executed.sum,gpu__time_duration.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      python3 -P $B21 ncu --cfgs 0 13 --impls ours --shapes B16:S4096:D256 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
fi
digest "cfg 0 = the default (D = 256: the split S / dP); 13 = the loop without it (main's)"
echo "#### racecheck"
grep -E "hazard|RACECHECK|ERROR SUMMARY|cfg 13|rc " $OUT/san.log 2>/dev/null | tail -6 | cut -c1-200
echo "#### ncu (B16 S4K D256: cfg 0, then cfg 13)"
grep -E "hstu_bwd_pds|gpu__time|inst_executed|wavefronts|bank_conflicts|hmma" $OUT/ncu.log 2>/dev/null | sed 's/(hstu::HstuParams.*//' | cut -c1-160 | tail -14
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
