#!/bin/bash
# audit32 run 3 (issue 32); on one H200 (part 2b skips there) or nvidia-h200-x2:
# 1. the NVIDIA-config step with a 25 % cache over the disk store in interleaved rounds (all-HBM, caching, caching +
#    prefetch built at once, 5 rounds, ratios paired per round; run 1's single pass spread as single passes do);
# 2. then side by side: (a) compute-sanitizer memcheck of the hybrid table ops' own tests (test_storage_gpu.py:
#    hybrid_table_ops_equal_hbm, contention, sorted-row duplicates, one-pass duplicate runs, module layouts / rows /
#    checkpoints; run 2's process for them spent its time on tests the -k also matched); (b) with >= 2 GPUs the
#    sharded path in every storage mode over NCCL with the disk store (nccl_storage.py), never run on NCCL since
#    330445b added it.
B=47
source "$(dirname "$0")/setup.sh"
nvidia-smi -L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "== 1. rounds ($(( $(date +%s) - t0 )) s)"
timeout 20 python3 -P benchmarks/embedding_tiers.py --skip hybrid,hkv,disk,step --rounds 5 --round-reps 20 \
    --fracs 0.25 --stores disk --opts sgd,adam --warmup 6 > $OUT/rounds.txt 2>&1
echo "rounds rc $? ($(( $(date +%s) - t0 )) s)"
echo "== 2. memcheck + NCCL ($(( $(date +%s) - t0 )) s)"
mc() {  # mc NAME PYTEST_ARGS...
  local n=$1; shift
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 DYNAMICEMB_TEST_SMALL=1 timeout -s INT -k 4 $(( $(left) - 5 )) \
      $CS --tool memcheck --error-exitcode 9 --print-limit 20 \
      python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib "$@" > $OUT/mc_$n.txt 2>&1
  echo "$n rc $? (9: memcheck errors; 124 / 130: cut by the budget)"
}
mc ops $TD/test_storage_gpu.py -k "test_hybrid_table_ops_equal_hbm" &
mc rest $TD/test_storage_gpu.py -k "test_hybrid_contention or test_hybrid_sorted_rows or test_hybrid_one_pass or \
test_hybrid_module_layouts or test_hybrid_module_rows" &
timeout $(( $(left) - 1 )) python3 -P $C/nccl_storage.py $TD 2 4 > $OUT/nccl.txt 2>&1 &
wait
echo "################ DIGEST ($GPU; done at $(( $(date +%s) - t0 )) s)"
grep -E "^step rounds|^\| " $OUT/rounds.txt | cut -c1-220 | head -20
tail -3 $OUT/rounds.txt
for f in $OUT/mc_*.txt; do
  echo "$(basename $f): $(grep -c PASSED $f) PASSED, $(grep -c FAILED $f) FAILED;" \
       "$(grep -E 'ERROR SUMMARY' $f | tail -1);" \
       "$(grep -cE '^========= (Invalid|Program hit|Address|Malloc|Leaked)' $f) memcheck error lines"
  grep -E "PASSED|FAILED" $f | sed 's/.*:://' | cut -c1-90
done
grep -h -E "^========= (Invalid|Program hit)" -A4 $OUT/mc_*.txt | head -20
tail -30 $OUT/nccl.txt
