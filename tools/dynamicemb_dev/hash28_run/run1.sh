#!/bin/bash
# hash28 run 1 (issue 35): the dedup insert's set at a lower load and the chunk's one feature (lab bits of op
# _lookup_lab_dedup; 49 = main's default 1 + 16 + 32): 177 = the set at 2.5 n slots, 305 = at 4 n, 561 = the chunk's
# feature once per block (insert, number pass), 817 = 305 + 561. GPU tests in parallel (the variants bitwise over
# four Adam steps, pooling none / sum; test_dedup_gpu and the bad-input tests under 817; CPU parity, CUDA graphs and
# repeatability under 817), then steady_ab (SGD: -, 177, 305, 561, 817; Adam: -, 817) in one process.
B=48
. .carry/hash28/setup.sh
timeout 15 $PT $T -k "dedup_insert_variants_agree" > $OUT/t_variants.txt 2>&1 & p1=$!
timeout 15 $PT --dedup-lab 817 $D > $OUT/t_dedup817.txt 2>&1 & p2=$!
timeout 15 $PT --dedup-lab 817 $K -k "bad_input and not compiled and not strict" > $OUT/t_bad817.txt 2>&1 & p3=$!
timeout 15 $PT --dedup-lab 817 $T -k "test_gpu_matches_cpu or cuda_graph or repeatable or host_sync" > $OUT/t_emb817.txt 2>&1 & p4=$!
for p in $p1 $p2 $p3 $p4; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_variants t_dedup817 t_bad817 t_emb817; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A25 "^____\|Error\|assert " $OUT/t_*.txt | head -50
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam \
  --variants=-,177,305,561,817 --later-variants=-,817 --rounds 2 --reps 15 --steps 6 --json $OUT/steady.json 2>&1 \
  | tee $OUT/steady.txt
echo "total: $(( $(date +%s) - t0 )) s"
