#!/bin/bash
# step31 run 1 (issue 35): Adam's step counter advanced inside the segmented update (the last block to start writes
# step + 1 after every block read the step for its bias corrections; module._step_in_update, the default) against
# the tensor add before the update ("b0", main's path). GPU tests (one process): the step counter in the update
# against the add, SGD and Adam, pooling none / sum (bitwise outputs, rows, Adam state, step counts); Adam's CUDA
# graph train step against eager (the counter under capture and replay); Adam with hot ids (cut segments) against
# the CPU path. Then steady_ab.py, Adam and SGD, "-" and
# "-@b0" with the timeline. Last, the byte-bound probe with Adam's 1,536-byte rows (what is left of the budget).
B=48
RUN=step31
. .carry/step31/setup.sh
timeout 18 $PT $T -k "step_counter_in_update or (cuda_graph_train_step_matches_eager and adam) or (long_bags_hot_ids and adam)" > $OUT/t_bump.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
echo "t_bump: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/t_bump.txt | tail -1)"
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout $(( $(left) - 6 )) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt adam,sgd \
  --timeline --variants=-,-@b0 --rounds 2 --reps 15 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | head -80
timeout $(left) $C/bin/step_bound_probe 10 > $OUT/probe.txt 2>&1
cat $OUT/probe.txt
echo "total: $(( $(date +%s) - t0 )) s"
