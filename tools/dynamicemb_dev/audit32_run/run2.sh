#!/bin/bash
# audit32 run 2 (issue 32): compute-sanitizer memcheck of the hybrid kernels, caching allocator off (each tensor its
# own cudaMalloc: an access past a buffer is caught). Never run under memcheck before: the train step's host-row
# staging (csrc/lookup/host_stage_kernels.cu, orders "forward" and "step"; test_hybrid_step_gpu.py) and the step's
# HBM-first inserts (test_hybrid_split_gpu.py -k fills_hbm_first); again since session 8: the hybrid table ops'
# sorted host-row pass (csrc/table/hybrid_rows.cu; test_storage_gpu.py -k hybrid, DYNAMICEMB_TEST_SMALL=1) and the
# hybrid modes' parity and checkpoint round trips. Five memcheck processes side by side; each stopped with SIGINT
# before the budget ends (pytest then prints its summary and compute-sanitizer its ERROR SUMMARY). Beside them, not
# under memcheck: run 1's two failures again after their test fixes (test_hybrid_torch_path_cuda with one HBM slot
# per bucket, so that host slots are trained; storage_modes_bitwise at world 1 with the disk store's parent made).
B=47
source "$(dirname "$0")/setup.sh"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "compute-sanitizer: $CS"
mc() {  # mc NAME PYTEST_ARGS...
  local n=$1; shift
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 DYNAMICEMB_TEST_SMALL=1 timeout -s INT -k 4 $(( $(left) - 5 )) \
      $CS --tool memcheck --error-exitcode 9 --print-limit 20 \
      python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib "$@" > $OUT/mc_$n.txt 2>&1
  echo "$n rc $? (9: memcheck errors; 124 / 130: cut by the budget)"
}
mc step $TD/test_hybrid_step_gpu.py -k "equals_hbm and split-step" &
mc fwd $TD/test_hybrid_step_gpu.py -k "equals_hbm and split-forward" &
mc flight $TD/test_hybrid_step_gpu.py $TD/test_hybrid_split_gpu.py -k "two_steps_in_flight or fills_hbm_first" &
mc tableops $TD/test_storage_gpu.py -k "hybrid and not mode_parity and not checkpoint_round_trips" &
mc modes $TD/test_storage_gpu.py -k "hybrid and (mode_parity or checkpoint_round_trips)" &
timeout $(( $(left) - 3 )) $PT $TD/test_storage_gpu.py -k hybrid_torch_path > $OUT/t_fix_torch.txt 2>&1 &
timeout $(( $(left) - 3 )) $PT $TD/test_sharded_gpu.py -k storage_modes_bitwise > $OUT/t_fix_shard.txt 2>&1 &
wait
echo
echo "################ DIGEST ($GPU; done at $(( $(date +%s) - t0 )) s)"
for f in $OUT/mc_*.txt; do
  echo "$(basename $f): $(grep -c PASSED $f) PASSED, $(grep -c FAILED $f) FAILED;" \
       "$(grep -E 'ERROR SUMMARY' $f | tail -1);" \
       "$(grep -cE '^========= (Invalid|Program hit|Address|Malloc|Leaked)' $f) memcheck error lines"
  grep -E "[0-9]+ (passed|failed)|interrupted" $f | tail -1
done
grep -h -E "^========= (Invalid|Program hit)" -A4 $OUT/mc_*.txt | head -30
digest $OUT/t_fix_torch.txt $OUT/t_fix_shard.txt
grep -h -E "^FAILED|^E  " $OUT/t_fix_*.txt | cut -c1-200 | head -10
