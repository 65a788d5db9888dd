#!/bin/bash
# hash29 run 3 (issue 35): the compiled step's dedup set size from _dedup_set_rule, now the builtin min on an int n
# (run 2: torch.sym_min's int result broke dynamo's trace of the step's autograd.Function on torch 2.11): the
# compiled training steps against eager, aot_eager for SGD / Adam and pooling none / sum, inductor for SGD with
# pooling none, in three processes; the set-size rule against the op.
B=48
RUN=hash29
. .carry/hash29/setup.sh
timeout 40 $PT $K -k "compiled_training_step_matches_eager and aot_eager and sgd" > $OUT/t_comp_sgd.txt 2>&1 & p1=$!
timeout 40 $PT $K -k "compiled_training_step_matches_eager and aot_eager and adam" > $OUT/t_comp_adam.txt 2>&1 & p2=$!
timeout 40 $PT $K -k "compiled_training_step_matches_eager and inductor and sgd and none" > $OUT/t_comp_ind.txt 2>&1 & p3=$!
timeout 40 $PT /tmp/t28/tests/dynamicemb/test_embedding_cpu.py -k "dedup_set_size_rule" > $OUT/t_rule.txt 2>&1 & p4=$!
for p in $p1 $p2 $p3 $p4; do wait $p; echo "rc $?"; done
for f in t_comp_sgd t_comp_adam t_comp_ind t_rule; do
  echo "$f: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -40
echo "total: $(( $(date +%s) - t0 )) s"
