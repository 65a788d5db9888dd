#!/bin/bash
# step36 run 2 (issue 35), the branch's wheel: Adam with bf16 moments (Adam(state_dtype=torch.bfloat16), opt-in;
# step flag state_bf16) and lab _lookup_lab_step 3 (the gather probing each id's table beside the dedup, timing
# only; 3: the gather on its own stream launched first, 4: the dedup's chain on a stream of the greatest priority and
# the gather on the caller's). GPU tests: the new file (the segmented update and the atomic scatter, 4-wide and scalar rows, against the
# CPU path error-relative; repeatable; CUDA graph against eager), then main's Adam tests of test_embedding_gpu.py (the
# fp32 path). Then steady_ab.py --timeline in one process: Adam (fp32 moments: main's path), Adam with bf16 moments
# ("-", "-@L3", "-@L4"), SGD ("-" = main's path, "-@L3", "-@L4").
B=53
. .carry/step36/setup.sh
T=/tmp/t36/tests/dynamicemb
(cd /tmp/t36 && PYTHONPATH=$SM timeout 13 $PT $T/test_adam_bf16_state_gpu.py > $OUT/t_bf16.txt 2>&1)
echo "rc $? ($(( $(date +%s) - t0 )) s)"
(cd /tmp/t36 && PYTHONPATH=$SM timeout 7 $PT $T/test_embedding_gpu.py -k "adam and (match_cpu_path or graph_train_step_matches)" > $OUT/t_main.txt 2>&1)
echo "rc $? ($(( $(date +%s) - t0 )) s)"
for f in t_bf16 t_main; do echo "$f: $(grep -E '[0-9]+ (passed|failed|error)' $OUT/$f.txt | tail -1)"; done
grep -h -A8 "^E  \|^FAILED" $OUT/t_*.txt | head -24 | cut -c1-220
PYTHONPATH=$SM timeout $(left) python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline \
  --opt adam,adam_bf16=-:-@L3:-@L4,sgd=-:-@L3:-@L4 --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "rc $? ($(( $(date +%s) - t0 )) s)"
grep -A6 "steady step" $OUT/steady.txt | grep "^| -\|^###" | cut -c1-150
grep -A30 "kernels with the host ahead" $OUT/steady.txt | grep "seg_apply\|sequence_kernel\|kernels with" | cut -c1-110
tail -2 $OUT/steady.txt | cut -c1-200
echo "total: $(( $(date +%s) - t0 )) s"
