#!/bin/bash
# hash29 run 2 (issue 35): the branch's final wheel (main's kernels; the compiled step sizes the dedup set by
# _dedup_set_rule): the compiled SGD step against eager (the test run 1's 16 s cap cut), then the mean step's
# timeline of the default and of the CSR on the step's own stream (S) for SGD and Adam over 10 pipelined steps (the
# sort's overlap cost per optimizer).
B=48
RUN=hash29
. .carry/hash29/setup.sh
timeout 30 $PT $K -k "compiled_training_step_matches_eager and aot_eager and sgd and none" > $OUT/t_compiled.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
echo "t_compiled: $(grep -E 'passed|failed|error' $OUT/t_compiled.txt | tail -1)"
grep -h -B2 -A25 "^____\|Error\|assert " $OUT/t_compiled.txt | head -30
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam --timeline \
  --variants=-,-@S --rounds 1 --reps 10 --steps 10 --json $OUT/steady2.json > $OUT/steady2.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady2.txt | grep -E "^### |^\| (-|-@S) \|" | head -12
echo "total: $(( $(date +%s) - t0 )) s"
