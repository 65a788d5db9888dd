#!/bin/bash
# audit32 run 3 (issue 32); best on nvidia-h200-x2 (part 2 skips on one GPU):
# 1. the NVIDIA-config step with a 25 % cache over the disk store in interleaved rounds (all-HBM, caching, caching +
#    prefetch built at once, 5 rounds, ratios paired per round; run 1's single pass spread as single passes do);
# 2. with >= 2 GPUs: the sharded path in every storage mode over NCCL with the disk store (nccl_storage.py), never
#    run on NCCL since 330445b added it.
B=47
source "$(dirname "$0")/setup.sh"
nvidia-smi -L
echo "== 1. rounds ($(( $(date +%s) - t0 )) s)"
timeout 24 python3 -P benchmarks/embedding_tiers.py --skip hybrid,hkv,disk,step --rounds 5 --round-reps 20 \
    --fracs 0.25 --stores disk --opts sgd,adam --warmup 6 > $OUT/rounds.txt 2>&1
echo "rounds rc $? ($(( $(date +%s) - t0 )) s)"
echo "== 2. NCCL ($(( $(date +%s) - t0 )) s)"
timeout $(( $(left) - 1 )) python3 -P $C/nccl_storage.py $TD 2 4 > $OUT/nccl.txt 2>&1
echo "nccl rc $?"
echo "################ DIGEST ($GPU; done at $(( $(date +%s) - t0 )) s)"
grep -E "^step rounds|^\| " $OUT/rounds.txt | cut -c1-220 | head -20
tail -3 $OUT/rounds.txt
tail -30 $OUT/nccl.txt
