#!/bin/bash
# step32 run 2 (issue 35): the lean kernel and the chunked kernel in one launch (lab op _lookup_lab_seg_lean: 72 the
# chunked blocks first; 456 / 712 the lean blocks first, 3 / 2 of them per SM beside the chunked ones; run 1's two
# launches were slower). GPU tests (one process): every lean variant against the chunked kernel alone (bitwise; Adam's
# embeddings to 1 ulp: one FMA contraction differs), against the CPU module (chunks 3 / 128), CUDA-graph replay.
# Then steady_ab.py --timeline, Adam "-" (main's path) against A72 / A456 / A712, SGD "-" against A72 / A456.
# (The lab op and its tests are in step32 f88c0871's tree and wheel; removed after run 2.)
B=48
RUN=step32
. .carry/step32/setup.sh
timeout 20 $PT $T --maxfail=4 -k "lean" > $OUT/t_lean.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
echo "t_lean: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/t_lean.txt | tail -1)"
grep -h -B2 -A14 "^E  " $OUT/t_lean.txt | head -40
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt adam,sgd --timeline \
  --variants=-,-@A72,-@A456,-@A712 --later-variants=-,-@A72,-@A456 --rounds 2 --reps 10 --steps 6 \
  --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | grep -v "Memset\|side \|cub::\|dedup_\|validate_\|insert_kernel\|resolve_kernel\|seg_keys\|seg_bounds" | head -100
echo "total: $(( $(date +%s) - t0 )) s"
