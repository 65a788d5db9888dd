#!/bin/bash
# step36 run 2 (issue 35): Adam with bf16 moments (Adam(state_dtype=torch.bfloat16), opt-in; step flag state_bf16),
# the branch's wheel. GPU tests: the new test file (the segmented update and the atomic scatter, 4-wide and scalar
# rows, against the CPU path error-relative; repeatable; CUDA graph against eager) and the CPU numerics file; then
# main's Adam tests of test_embedding_gpu.py (the fp32 path is unchanged). Then steady_ab.py in one process: Adam
# (fp32 moments: main's path), Adam with bf16 moments, SGD, each with its timeline.
B=52
. .carry/step36/setup.sh
T=/tmp/t36/tests/dynamicemb
(cd /tmp/t36 && PYTHONPATH=$SM timeout 18 $PT $T/test_adam_bf16_state_gpu.py $T/test_adam_bf16_state_cpu.py > $OUT/t_bf16.txt 2>&1)
echo "rc $? ($(( $(date +%s) - t0 )) s)"
(cd /tmp/t36 && PYTHONPATH=$SM timeout 8 $PT $T/test_embedding_gpu.py -k "adam and (match_cpu_path or graph)" > $OUT/t_main.txt 2>&1)
echo "rc $? ($(( $(date +%s) - t0 )) s)"
for f in t_bf16 t_main; do echo "$f: $(grep -E '[0-9]+ (passed|failed|error)' $OUT/$f.txt | tail -1)"; done
grep -h -B2 -A10 "^E  \|Error" $OUT/t_*.txt | head -30 | cut -c1-200
PYTHONPATH=$SM timeout $(left) python3 -P $TOOLS/steady_ab.py --bench benchmarks --opt adam,adam_bf16,sgd --timeline \
  --variants=- --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "rc $? ($(( $(date +%s) - t0 )) s)"
grep -A4 "steady step" $OUT/steady.txt | grep "^| -\|###" | cut -c1-160
grep -A12 "kernels with the host ahead" $OUT/steady.txt | grep "seg_apply\|sequence\|^###\|adam" | cut -c1-120
tail -2 $OUT/steady.txt | cut -c1-200
echo "total: $(( $(date +%s) - t0 )) s"
