#!/bin/bash
# (The record of session 25's run 2, on hash28 ae39d70's wheel; lab bit 64, the self-cleaning set, was removed after it.)
# hash28 run 2 (issue 35): the default dedup flags are now 817 (49 + the set at 4 n slots + the chunk's one feature,
# run 1: SGD span -0.004, Adam steady -0.008 ms); lab bit 64 = the self-cleaning set (the number pass frees its
# claimers' slots, the clear pass fills only a set whose header does not say FREE): 881 = 817 + 64. GPU tests in
# parallel (test_dedup_gpu under the default and under 881, incl. the self-cleaning test; the variants bitwise incl.
# 881 / 113; CPU parity, CUDA graphs, repeatability, no host sync under 881; bad inputs under 881), step_same at the
# preset (49 = main's code path, 817, 881: checksums against 49), then steady_ab (SGD: -, 49, 305, 881; Adam: -, 49, 881).
B=48
. .carry/hash28/setup.sh
timeout 18 $PT $D > $OUT/t_dedup.txt 2>&1 & p1=$!
timeout 18 $PT --dedup-lab 881 $D > $OUT/t_dedup881.txt 2>&1 & p2=$!
timeout 18 $PT $T -k "dedup_insert_variants_agree" > $OUT/t_variants.txt 2>&1 & p3=$!
timeout 18 $PT --dedup-lab 881 $T -k "test_gpu_matches_cpu or cuda_graph or repeatable or host_sync" > $OUT/t_emb881.txt 2>&1 & p4=$!
timeout 18 $PT --dedup-lab 881 $K -k "bad_input and not compiled and not strict" > $OUT/t_bad881.txt 2>&1 & p5=$!
for p in $p1 $p2 $p3 $p4 $p5; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_dedup t_dedup881 t_variants t_emb881 t_bad881; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1) [$(head -c 300 $OUT/$f.txt | tr -d '\n' | tail -c 120)]"
done
grep -h -B2 -A25 "^____\|Error\|assert " $OUT/t_*.txt | head -50
timeout 12 python3 -P $C/tree/tools/dynamicemb_dev/step_same.py --bench benchmarks --out $OUT/same.json \
  --variants 0/0/49,0/0/817,0/0/881 --cases preset.sgd 2>&1 | tail -4
[ -f $OUT/same.json ] && python3 -P $C/tree/tools/dynamicemb_dev/step_same.py --compare $OUT/same.json $OUT/same.json
echo "same: $(( $(date +%s) - t0 )) s"
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam \
  --variants=-,49,305,881 --later-variants=-,49,881 --rounds 2 --reps 15 --steps 6 --json $OUT/steady2.json 2>&1 | tee $OUT/steady2.txt
echo "total: $(( $(date +%s) - t0 )) s"
