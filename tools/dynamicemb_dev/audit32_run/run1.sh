#!/bin/bash
# audit32 run 1 (issue 32): the disk store on the device.
# 1. the train step at NVIDIA's config with 25 % of the rows in the HBM cache over a DiskStore per table (RocksDB via
#    rocksdict), SGD and Adam, with and without prefetch, all-HBM in the same process (never measured: tier25's run
#    was cut after the 10 % row). Alone on the GPU.
# 2. then side by side: audit32's new CUDA tests (checkpoint round trips in every mode, the disk store's restart,
#    hybrid tables on the torch path with admission), test_storage_gpu.py's disk cases, the sharded CUDA path over
#    every store with the disk store (test_sharded_gpu.py -k storage_modes_bitwise: the device never had rocksdict
#    for it) and examples/embedding_beyond_hbm.py (hybrid, uva, disk, disk reopened half-way; all vs all-HBM).
B=47
source "$(dirname "$0")/setup.sh"
echo "== 1. tiers step over the disk store ($(( $(date +%s) - t0 )) s)"
timeout 22 python3 -P benchmarks/embedding_tiers.py --skip hybrid,hkv,disk --opts sgd,adam --fracs 0.25 \
    --stores disk --warmup 4 > $OUT/tiers.txt 2>&1
echo "tiers rc $? ($(( $(date +%s) - t0 )) s)"
echo "== 2. tests ($(( $(date +%s) - t0 )) s)"
L=$(( $(left) - 1 ))
K="checkpoint_round_trips or survives_restart or hybrid_torch_path or (poolings and not disk)"
timeout $L $PT $TD/test_storage_gpu.py -k "$K" > $OUT/t_new.txt 2>&1 &
p1=$!
timeout $L $PT $TD/test_storage_gpu.py -k "disk and not checkpoint_round_trips and not survives_restart" \
    > $OUT/t_disk.txt 2>&1 &
p2=$!
timeout $L $PT $TD/test_sharded_gpu.py -k storage_modes_bitwise > $OUT/t_shard.txt 2>&1 &
p3=$!
timeout $L python3 -P $C/tree/examples/embedding_beyond_hbm.py --steps 12 > $OUT/example.txt 2>&1 &
p4=$!
for p in $p1 $p2 $p3 $p4; do wait $p; echo "rc $?"; done
echo
echo "################ DIGEST ($GPU; done at $(( $(date +%s) - t0 )) s)"
digest $OUT/t_new.txt $OUT/t_disk.txt $OUT/t_shard.txt
cat $OUT/example.txt | cut -c1-200 | tail -6
grep -h -E "^FAILED|^ERROR|Error" $OUT/t_*.txt | cut -c1-200 | head -12
grep -E "^\| |^step:" $OUT/tiers.txt | cut -c1-220 | head -40
tail -3 $OUT/tiers.txt
