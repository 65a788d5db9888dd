#!/bin/bash
# (The record of session 26's run 1, on hash29 d4ff17e's wheel; lab op _lookup_lab_sort_split and the P<N> setting were
# removed after it.)
# hash29 run 1 (issue 35): the SGD step's timeline (each kernel's start / end per stream from the step's checks) on
# the default path and with the CSR built on the step's stream (S: the sort's own time in the chain), main's fork
# after the dedup (L0), the hand sort (s1) and the hand sort's passes as 2 / 4 consecutive grids (P2 / P4, lab op
# _lookup_lab_sort_split: fewer sort blocks beside the number pass and the gather at once); Adam's default and
# hand-sort splits. GPU tests first: the CSR sort variants bitwise (incl. the splits), the compiled step (the dedup
# set's size from _dedup_set_rule), the set-size rule against the op.
B=48
RUN=hash29
. .carry/hash29/setup.sh
timeout 16 $PT $T -k "csr_sort_variants_agree and none" > $OUT/t_sort.txt 2>&1 & p1=$!
timeout 16 $PT $K -k "compiled_training_step_matches_eager and aot_eager and sgd" > $OUT/t_compiled.txt 2>&1 & p2=$!
timeout 16 $PT /tmp/t28/tests/dynamicemb/test_embedding_cpu.py -k "dedup_set_size_rule" > $OUT/t_rule.txt 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_sort t_compiled t_rule; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A25 "^____\|Error\|assert " $OUT/t_*.txt | head -40
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam --timeline \
  --variants=-,-@S,-@L0,-@s1,-@s1+P2,-@s1+P4 --later-variants=-,-@s1,-@s1+P2 --rounds 2 --reps 15 --steps 6 \
  --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | head -60
echo "total: $(( $(date +%s) - t0 )) s"
