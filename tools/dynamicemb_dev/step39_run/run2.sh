#!/bin/bash
# step39 run 2 (issue 35). Branch wheel = main 9ce5c6b3 + lab bits of the dedup flags ("-" = 817 = main's code path):
#   2 the number pass's find from table records in shared memory (step38's), 4 no dedup resolve pass (the gather
#   resolves repeats and writes them back), 8 the insert pass as a programmatic dependent, 64 the device checks
#   launched after the dedup's insert (the clear pass first; the checks wait for the insert before writing the
#   verdict; the count pass drops a bad batch): 831 = 817|2|4|8 (run 1), 881 = 817|64, 895 = 817|2|4|8|64.
# (1) GPU tests: test_step_lab39_gpu.py (every bit bitwise against 817, SGD / Adam, pooling none / sum; the resolve
# pass gone; CUDA graph under 895; every bad-input case under 881, two under 895), the existing dedup-variant and
# bad-input-variant tests; (2) steady_ab.py --timeline SGD -,831,881,895 and Adam -,895 in one process; digest.
B=54
. .carry/step39/setup.sh
T=/tmp/t39/tests/dynamicemb
(cd /tmp/t39 && PYTHONPATH=$SM timeout 19 $PT $T/test_step_lab39_gpu.py $T/test_embedding_gpu.py $T/test_checks_gpu.py \
  -k "lab39 or dedup_insert_variants_agree or under_dedup_variants" > $OUT/t_lab.txt 2>&1)
echo "tests rc $? ($(( $(date +%s) - t0 )) s): $(grep -E '[0-9]+ (passed|failed|error)' $OUT/t_lab.txt | tail -1)"
grep -h -A3 "^E  \|^FAILED" $OUT/t_lab.txt | grep -v "^E    +" | head -6 | cut -c1-180
PYTHONPATH=$SM timeout $(( $(left) - 2 )) python3 -P $TOOLS/steady_ab.py --bench benchmarks --timeline \
  --timeline-first dedup_clear_kernel \
  --opt sgd,adam --variants=-,831,881,895 --later-variants=-,895 --rounds 3 --reps 10 --steps 6 \
  --json $OUT/steady.json > $OUT/steady.txt 2>&1
echo "steady rc $? ($(( $(date +%s) - t0 )) s)"
python3 $C/step39_digest.py $OUT/steady.json > $OUT/digest.txt 2>&1
python3 $C/step39_digest.py $OUT/steady.json --brief 2>&1 | cut -c1-150
echo "total: $(( $(date +%s) - t0 )) s"
