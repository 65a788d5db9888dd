#!/bin/bash
# hkv38 run 1 (issue 35): HierarchicalKV ae24eec's own benchmark (the grid driver: dim 32, 128M slots, loads 0.5 /
# 0.75 / 1.0, its five ops find / find_or_insert / insert_or_assign / insert_and_evict / assign, host clock + stream
# sync, best of 2 fills) and ours in the same process afterwards (benchmarks/hash_table.py --peer-hkv with main38's
# dynamicemb wheel: device time with the queue ahead and HKV's host clock + sync, median of 3; uniform and Zipf 1.05),
# then dim 64 (64M slots) the same way if >= 20 s are left. Digest: ours / HKV per load and op.
B=54
. .carry/hkv38/common.sh
. $C/setup.sh
peer() {  # peer DIM HKV_TIMEOUT: HKV's slice then ours, one hash_table.py process; output $OUT/dimDIM.txt
  echo "## dim $1 ($(elapsed) s)"
  (cd $C/tree && PYTHONPATH=/tmp/site_main timeout $(( $(left) + 1 )) python3 -P benchmarks/hash_table.py \
    --peer-hkv $BIN/hkv_bench --hkv-commit $HKV_COMMIT --peer-timeout $2 --dims $1 --reps 3 --no-plot \
    --commit "main38 wheel 6ca06103, hkv38 hash_table.py" --hkv-log $OUT/hkv_dim$1.log > $OUT/dim$1.txt 2>&1)
  echo "rc $? ($(elapsed) s)"
}
peer 32 26
[ $(left) -ge 20 ] && peer 64 10
python3 $C/digest.py $OUT/dim32.txt $OUT/dim64.txt
echo "total $(elapsed) s"
