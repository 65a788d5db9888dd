#!/bin/bash
# step38 run 3 (issue 35), main's wheel only (no branch build; the branch's product code is main's): (1) is main's
# step repeatable under LFU evictions with refusals? (runs 1-2: lab variants differed from main's path only there;
# step38_lfu_order.py trains the GPU test's 4 steps 3 times per policy on fresh modules); (2) the H200's random
# 8-byte / 32-byte access rate at the find's scale (step38_rand.py: the number pass's score writes, ~13 us).
B=24
. .carry/step38/setup.sh
PYTHONPATH=$SM timeout 10 python3 -P $C/step38_lfu_order.py --runs 3 > $OUT/lfu.txt 2>&1
echo "lfu rc $? ($(( $(date +%s) - t0 )) s)"; grep "^|" $OUT/lfu.txt; tail -2 $OUT/lfu.txt | grep -v "^|" | cut -c1-200
timeout $(( $(left) - 1 )) python3 -P $C/step38_rand.py --reps 6 > $OUT/rand.txt 2>&1
echo "rand rc $? ($(( $(date +%s) - t0 )) s)"; grep "^| [re]" $OUT/rand.txt | cut -c1-90
echo "total: $(( $(date +%s) - t0 )) s"
