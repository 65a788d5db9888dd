#!/bin/bash
# step31 run 4 (issue 35): the branch's final wheel (main + Adam's step counter advanced by the segmented update: the
# kernels of run 2; the row-ordered CSR lab removed). GPU tests of the final default, one process at a time: the CUDA
# graph train steps of Adam against eager (four poolings, and under the dedup variants), the counter in the update
# against the add (SGD, Adam); test_dedup_gpu.py whole. Then steady_ab.py, Adam and SGD, "-" against "-@b0" (main's
# tensor add before the update), a third measurement.
B=48
RUN=step31
. .carry/step31/setup.sh
timeout 12 $PT $T -k "(cuda_graph_train_step and adam) or step_counter_in_update" > $OUT/t_graph.txt 2>&1
echo "rc $?; $(( $(date +%s) - t0 )) s"
timeout 12 $PT $D > $OUT/t_dedup.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
for f in t_graph t_dedup; do
  echo "$f: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt adam,sgd --timeline \
  --variants=-,-@b0 --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | grep -v "Memset\|side \|cub::" | head -90
echo "total: $(( $(date +%s) - t0 )) s"
