#!/bin/bash
# step26 run 2 (timing only): what the training sequence's gather costs when it probes each id's table itself, as the
# eval's does (lab op _lookup_lab_step 2 of step26 1d33239's wheel, removed after this run; timing only, no tests; at the
# preset every unique hits after the warm-up and the outputs are the same), against main's code path in one process.
# With the side-stream probe's run 1 (the number pass's find costs ~0.025 ms) this bounds the gain of a training
# gather that probes and inserts its misses after itself.
B=40
. .carry/step26/setup.sh
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam \
  --variants=-,-@L2 --rounds 3 --reps 15 --steps 6 --json $OUT/steady2.json 2>&1 | tee $OUT/steady2.txt
echo "total: $(( $(date +%s) - t0 )) s"
