#!/bin/bash
# step38 run 2 (issue 35): the branch wheel with VDESC as the default dedup path (flags VNEW; main's path = 817).
# (1) GPU tests under the new default: test_embedding_gpu.py's CPU-path comparisons, CUDA graphs, repeatability and
# the dedup variants (817 bitwise against the new default inside them), test_dedup_gpu.py, the checks under the dedup
# variants; (2) steady_ab.py SGD and Adam, "-" (the new default) against 817 (main's path), with the timeline.
B=53
. .carry/step38/setup.sh
T=/tmp/t38/tests/dynamicemb
(cd /tmp/t38 && PYTHONPATH=$SM timeout 16 $PT $T/test_embedding_gpu.py -k \
  "match_cpu_path or graph_train_step or dedup_insert_variants_agree or count_find_agrees or csr_sort_variants" \
  > $OUT/t_emb.txt 2>&1) &
(cd /tmp/t38 && PYTHONPATH=$SM timeout 16 $PT $T/test_dedup_gpu.py $T/test_repeatable_step_gpu.py \
  $T/test_checks_gpu.py -k "not strict" > $OUT/t_dedup.txt 2>&1) &
wait
echo "tests ($(( $(date +%s) - t0 )) s)"
for f in t_emb t_dedup; do echo "$f: $(grep -E '[0-9]+ (passed|failed|error)' $OUT/$f.txt | tail -1)"; done
grep -h -A5 "^E  \|^FAILED" $OUT/t_*.txt | head -12 | cut -c1-200
PYTHONPATH=$SM timeout $(( $(left) - 1 )) python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline --opt sgd,adam \
  --variants=-,817 --later-variants=-,817 --rounds 3 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "steady rc $? ($(( $(date +%s) - t0 )) s)"
grep -A5 "steady step" $OUT/steady.txt | grep "^| [-0-9]" | cut -c1-100
grep -A30 "kernels with the host ahead" $OUT/steady.txt | grep "dedup_\|kernels with" | cut -c1-100
echo "total: $(( $(date +%s) - t0 )) s"
