#!/bin/bash
# hkv38 run 2 (issue 35): (a) this branch's wheel (assign_lru_kernel without its lab what-ifs; main's product path
# otherwise) under test_table_assign_gpu.py (duplicates, missing keys, scores per policy on the default and the
# copiers' paths; the kernel's table = the copiers'); (b) HierarchicalKV ae24eec's benchmark and ours at dim 8 (128M
# slots; run 1 had dims 32 and 64), loads 0.5 / 0.75 / 1.0, uniform + Zipf, as run 1 (main38's wheel for ours).
B=54
SITES="main self"
. .carry/hkv38/common.sh
. $C/setup.sh
run_tests 16 - "" tests/dynamicemb/test_table_assign_gpu.py
digest_tests
peer() {  # peer DIM HKV_TIMEOUT: HKV's slice then ours, one hash_table.py process; output $OUT/dimDIM.txt
  echo "## dim $1 ($(elapsed) s)"
  (cd $C/tree && PYTHONPATH=/tmp/site_main timeout $(( $(left) + 1 )) python3 -P benchmarks/hash_table.py \
    --peer-hkv $BIN/hkv_bench --hkv-commit $HKV_COMMIT --peer-timeout $2 --dims $1 --reps 3 --no-plot \
    --commit "main38 wheel 6ca06103, hkv38 hash_table.py" --hkv-log $OUT/hkv_dim$1.log > $OUT/dim$1.txt 2>&1)
  echo "rc $? ($(elapsed) s)"
}
peer 8 $(( $(left) / 2 ))
python3 $C/digest.py $OUT/dim8.txt
echo "total $(elapsed) s"
