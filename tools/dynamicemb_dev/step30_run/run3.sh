#!/bin/bash
# step30 run 3 (issue 35): the branch's final wheel (main + plain SGD's step counter in the update; the repeats-only
# CSR removed). GPU tests, three processes: the step counter in the update against the add (pooling none / sum; run
# 2's copy of the test had two setup bugs), the plain-SGD kernel tests against the CPU path (every pooling and row
# width; long bags and hot ids), the compiled SGD steps (aot_eager) against eager. Then steady_ab.py, SGD, "-" and
# "-@b0" (main's path), a second measurement.
B=48
RUN=step30
. .carry/step30/setup.sh
timeout 24 $PT $T -k "sgd_step_counter or (kernels_match_cpu_path and sgd and not wd and not norm)" > $OUT/t_bump.txt 2>&1 & p1=$!
timeout 24 $PT $T -k "kernels_long_bags_hot_ids and sgd and not wd and not norm" > $OUT/t_hot.txt 2>&1 & p2=$!
timeout 24 $PT $K -k "compiled_training_step_matches_eager and aot_eager and sgd" > $OUT/t_comp.txt 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_bump t_hot t_comp; do
  echo "$f: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd --timeline \
  --variants=-,-@b0 --rounds 3 --reps 15 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | head -24
echo "total: $(( $(date +%s) - t0 )) s"
