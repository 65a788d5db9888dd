#!/bin/bash
# step32 run 1 (issue 35): the segmented update's lean kernel for the small segments (op _lookup_lab_seg_lean N: the
# segments of <= N occurrences by a warp per unique, the others by the chunked kernel after it; the build's default
# is still 0 = main's chunked kernel alone). GPU tests (one process): the lean kernel bitwise against the chunked
# kernel alone (SGD, SGD + weight decay, Adam; pooling none / sum with weights; misses, hot ids), against the CPU
# module (chunks 3 / 128: cut hot segments), CUDA-graph replay against eager. Then steady_ab.py --timeline, Adam "-"
# (main's path) against A8 / A4, SGD "-" against A8.
# (The lab op and its tests are in step32 f88c0871's tree and wheel; removed after run 2.)
B=48
RUN=step32
. .carry/step32/setup.sh
timeout 16 $PT $T --maxfail=4 -k "lean" > $OUT/t_lean.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
echo "t_lean: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/t_lean.txt | tail -1)"
grep -h -B2 -A14 "^E  " $OUT/t_lean.txt | head -40
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt adam,sgd --timeline \
  --variants=-,-@A8,-@A4 --later-variants=-,-@A8 --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | grep -v "Memset\|side \|cub::" | head -110
echo "total: $(( $(date +%s) - t0 )) s"
