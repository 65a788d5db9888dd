#!/bin/bash
# step30 run 2 (issue 35): plain SGD's step counter advanced by the segmented update's first thread (module default
# _step_in_update = True; lookup_backward flag bump_step, its step argument now declared mutable) against the tensor
# add before the update (b0, main's path). GPU tests first, three processes: the step counter in the update against
# the add (pooling none / sum) and the repeats-only CSR bitwise (its "unique" case fixed: run 1's test aliased its
# input); the compiled SGD steps (aot_eager; the schema's mutable step) against eager. Then steady_ab.py, SGD only,
# "-" and "-@b0" with the timeline.
B=48
RUN=step30
. .carry/step30/setup.sh
timeout 26 $PT $T -k "sgd_step_counter_in_update" > $OUT/t_bump.txt 2>&1 & p1=$!
timeout 26 $PT $T -k "rep_csr_agrees" > $OUT/t_rep.txt 2>&1 & p2=$!
timeout 26 $PT $K -k "compiled_training_step_matches_eager and aot_eager and sgd" > $OUT/t_comp.txt 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_bump t_rep t_comp; do
  echo "$f: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd --timeline \
  --variants=-,-@b0 --rounds 3 --reps 15 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | head -70
echo "total: $(( $(date +%s) - t0 )) s"
