#!/bin/bash
# step38 run 3 (issue 35; <= 25 s). Branch wheel (main + lab bit 2 of the dedup flags, 819 = 817 | 2: the number
# pass copies the table records and the feature -> table map into shared memory, so a claimer's find starts there;
# run 1's ncu: ~23 % of the pass's stall samples on the feature-table -> record chain). (1) the bitwise
# dedup-variant test with 819 (misses every step, hot ids, pooling none / sum; scores compared); (2) steady_ab.py SGD
# -,819 with the timeline; (3) main's step repeated 3x under LFU evictions (runs 1-2: variants differed from main
# only there: is main itself order-dependent there?).
B=25
. .carry/step38/setup.sh
T=/tmp/t38/tests/dynamicemb
(cd /tmp/t38 && PYTHONPATH=$SM timeout 6 $PT $T/test_embedding_gpu.py -k "dedup_insert_variants_agree" > $OUT/t_var.txt 2>&1)
echo "tests rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed|error)' $OUT/t_var.txt | tail -1)"
grep -h -A2 "^E  \|^FAILED" $OUT/t_var.txt | grep -v "^E    +" | head -4 | cut -c1-160
PYTHONPATH=$SM timeout 8 python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline --opt sgd \
  --variants=-,819 --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "steady rc $? ($(( $(date +%s) - t0 )) s)"
grep -A5 "steady step" $OUT/steady.txt | grep "^| [-0-9]" | cut -c1-100
grep -A30 "kernels with the host ahead" $OUT/steady.txt | grep "dedup_number\|sequence_kernel" | cut -c1-100
awk '/the mean step.s timeline/{v=$0} /dedup_number|sequence_kernel/{print substr(v,1,9), $0}' $OUT/steady.txt | grep -v "^ " | cut -c1-90
PYTHONPATH=$M timeout $(( $(left) )) python3 -P $C/step38_lfu_order.py --runs 2 --policies lru,lfu > $OUT/lfu.txt 2>&1
echo "lfu rc $? ($(( $(date +%s) - t0 )) s)"; grep "^| [le]" $OUT/lfu.txt
echo "total: $(( $(date +%s) - t0 )) s"
