#!/bin/bash
# step36 run 3 (issue 35), the branch's final wheel: Adam with bf16 moments (opt-in), the K entries in flight holding
# the moments as packed bf16 pairs; the labs of run 2 removed. GPU tests: the new file whole (the segmented update
# and the atomic scatter, 4-wide and scalar rows, against the CPU path; repeatable; the two lab forms bitwise; CUDA
# graph against eager), then test_embedding_gpu.py's CPU-path comparisons, hot ids and CUDA graphs (every optimizer:
# the fp32 paths share the edited kernels). Then steady_ab.py --timeline in one process: Adam with fp32 moments
# (main's path), with bf16 moments ("-" = 4 blocks per SM, "-@Q1" = 3), SGD (main's path).
B=53
. .carry/step36/setup.sh
T=/tmp/t36/tests/dynamicemb
(cd /tmp/t36 && PYTHONPATH=$SM timeout 8 $PT $T/test_adam_bf16_state_gpu.py > $OUT/t_bf16.txt 2>&1)
echo "rc $? ($(( $(date +%s) - t0 )) s)"
(cd /tmp/t36 && PYTHONPATH=$SM timeout 14 $PT $T/test_embedding_gpu.py -k "match_cpu_path or long_bags or graph_train_step" > $OUT/t_main.txt 2>&1)
echo "rc $? ($(( $(date +%s) - t0 )) s)"
for f in t_bf16 t_main; do echo "$f: $(grep -E '[0-9]+ (passed|failed|error)' $OUT/$f.txt | tail -1)"; done
grep -h -A6 "^E  \|^FAILED" $OUT/t_*.txt | head -20 | cut -c1-220
PYTHONPATH=$SM timeout $(left) python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline \
  --opt adam,adam_bf16=-:-@Q1,sgd --rounds 3 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "rc $? ($(( $(date +%s) - t0 )) s)"
grep -A6 "steady step" $OUT/steady.txt | grep "^| -" | cut -c1-110
grep -A30 "kernels with the host ahead" $OUT/steady.txt | grep "seg_apply\|sequence_kernel\|kernels with" | cut -c1-110
tail -2 $OUT/steady.txt | cut -c1-200
echo "total: $(( $(date +%s) - t0 )) s"
