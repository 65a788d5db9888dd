#!/bin/bash
# step38 run 2 (issue 35). Run 1: the number pass without its score writes (881, timing only) took the SGD span
# -0.012 ms (number pass -0.014); moving the find (825 count pass, 821 / 823 side stream) was slower (+0.010 to
# +0.019; removed). Branch wheel (4783096a): lab bit 2 of the dedup flags, 819 = 817 | 2, the hits' score writes off the chain (a step
# without misses writes them on a side stream after the resolve pass, joined at the op's end; a step with misses in
# the resolve pass, before the insert pass evicts). "-" = main's path (817).
# (1) GPU tests: 819 bitwise against 817 (all-hit steps and steps with misses; LRU / LFU / epoch LFU; pooling none /
# sum; evictions), the dedup-variant test with 3 / 819, CUDA-graph steps and bad inputs under 819;
# (2) steady_ab.py SGD and Adam -,819 with the timeline.
B=53
. .carry/step38/setup.sh
T=/tmp/t38/tests/dynamicemb
(cd /tmp/t38 && PYTHONPATH=$SM timeout 15 $PT $T/test_embedding_gpu.py $T/test_checks_gpu.py -k \
  "late_scores_agree or dedup_insert_variants_agree or (under_dedup_variants and 819)" \
  > $OUT/t_late.txt 2>&1)
echo "tests rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed|error)' $OUT/t_late.txt | tail -1)"
grep -h -A3 "^E  \|^FAILED" $OUT/t_late.txt | grep -v "^E    +" | head -8 | cut -c1-160
PYTHONPATH=$SM timeout $(( $(left) - 2 )) python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline --opt sgd,adam \
  --variants=-,819 --later-variants=-,819 --rounds 3 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "steady rc $? ($(( $(date +%s) - t0 )) s)"
grep -A6 "steady step" $OUT/steady.txt | grep "^| [-0-9]" | cut -c1-100
grep -A30 "kernels with the host ahead" $OUT/steady.txt | grep "dedup_\|sequence_kernel\|kernels with" | cut -c1-110
echo "total: $(( $(date +%s) - t0 )) s"
