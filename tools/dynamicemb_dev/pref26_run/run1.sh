#!/bin/bash
# pref26 run 1 (issue 32): the adaptive prefetch's count jobs over host-staged stores (host, disk).
# 1. the NVIDIA-config step with a 25 % cache over the disk store and over the host store in interleaved rounds:
#    all-HBM; per store one module timed without prefetch, with prefetch (this branch: a warm prefetch queues a
#    count only) and with a job every step (prefetch_adaptive off = main26's path over these stores), same process;
# 2. then the prefetch tests on CUDA, three processes side by side (the new test_prefetch_adaptive_counts_cuda,
#    the device-batch prefetch over the host and disk stores, the eviction-pressure and pipeline tests, op
#    cache_probe's tests).
B=47
source "$(dirname "$0")/setup.sh"
echo "== 1. rounds ($(( $(date +%s) - t0 )) s)"
timeout 20 python3 -P $C/tree/benchmarks/embedding_tiers.py --skip hybrid,hkv,disk,step --rounds 4 --round-reps 20 \
    --fracs 0.25 --stores disk,host --opts sgd,adam --warmup 6 --job-rows > $OUT/rounds.txt 2>&1
echo "rounds rc $? ($(( $(date +%s) - t0 )) s)"
echo "== 2. tests ($(( $(date +%s) - t0 )) s)"
T=$(( $(left) - 2 ))
timeout $T $PT $TD/test_storage_gpu.py -k prefetch > $OUT/t_storage.txt 2>&1 &
timeout $T $PT $TD/test_uva_store_gpu.py -k prefetch > $OUT/t_uva.txt 2>&1 &
timeout $T $PT $TD/test_cache_probe_gpu.py > $OUT/t_probe.txt 2>&1 &
wait
echo "################ DIGEST ($GPU; done at $(( $(date +%s) - t0 )) s)"
grep -E "^\| " $OUT/rounds.txt | cut -c1-200 | head -20
grep -E "^step rounds" $OUT/rounds.txt | cut -c1-200
tail -3 $OUT/rounds.txt | cut -c1-300
digest $OUT/t_*.txt
grep -hE "^(FAILED|ERROR)" $OUT/t_*.txt | cut -c1-200 | head -20
