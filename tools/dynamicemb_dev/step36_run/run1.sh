#!/bin/bash
# step36 run 1 (issue 35), main's wheel only (no branch build): the fresh device timeline of main's SGD step at
# NVIDIA's config (default: the CSR on the side stream; "S": the CSR on the step's own stream after the dedup, so
# each kernel runs alone), Adagrad (rows [w | s] of 1,024 B: the bytes of Adam with bf16 moments, the proxy that
# sizes the reduced-precision state before it is built) and Adam, in one process. steady_ab.py --timeline.
B=50
. .carry/step36/setup.sh
PYTHONPATH=$SM timeout $(left) python3 -P $TOOLS/steady_ab.py --bench benchmarks --opt sgd,adagrad,adam --timeline \
  --variants=-,-@S --later-variants=- --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "rc $? ($(( $(date +%s) - t0 )) s)"
# digest: the step tables, then the SGD default timeline's main-stream rows
grep -A5 "steady step" $OUT/steady.txt | grep "^|" | grep -v "^|---"
grep -A40 "sgd, -: the mean step" $OUT/steady.txt | grep "^|" | grep -v "Memset\|^|---" | cut -c1-90 | head -30
tail -3 $OUT/steady.txt | cut -c1-200
echo "total: $(( $(date +%s) - t0 )) s"
