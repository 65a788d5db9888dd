#!/bin/bash
# step30 run 1 (issue 35): the repeats-only CSR (lab op _lookup_lab_step 2) against the default (1: the early fork,
# cub's sort over every id) in one process. GPU tests first: the repeats-only CSR bitwise against the default over
# three sequence steps (few / many ids, hot ids, no repeat, one repeating id, > 2^16 repeating uniques); the CSR sort
# variants (the default's code paths, whose count / number passes this branch touched). Then steady_ab.py with the
# SGD and Adam timelines, "-" (default) and "-@L2".
B=48
RUN=step30
. .carry/step30/setup.sh
timeout 15 $PT $T -k "rep_csr_agrees" > $OUT/t_rep.txt 2>&1 & p1=$!
timeout 15 $PT $T -k "csr_sort_variants_agree and none and csr_in_forward" > $OUT/t_sort.txt 2>&1 & p2=$!
for p in $p1 $p2; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_rep t_sort; do
  echo "$f: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam --timeline \
  --variants=-,-@L2 --rounds 2 --reps 15 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | head -80
echo "total: $(( $(date +%s) - t0 )) s"
