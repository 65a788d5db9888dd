#!/bin/bash
# step31 run 3 (issue 35): a sequence's CSR ordered by the uniques' rows (lab op _lookup_lab_step 2: keys table <<
# 20 | slot, forked after the insert pass), so the update reads and writes [w | m | v] in address order, against
# the default (the early fork, unique order). GPU test first (one process): the row-ordered CSR bitwise against the
# default over three steps with misses (SGD, Adam; no cut segments). Then steady_ab.py, Adam and SGD, "-" and
# "-@L2" with the timeline. Last, the probe's fused Adam update at the segmented kernel's 32 warps per SM.
B=48
RUN=step31
. .carry/step31/setup.sh
timeout 12 $PT $T -k "row_ordered_csr_agrees" > $OUT/t_row.txt 2>&1
echo "rc $?; tests: $(( $(date +%s) - t0 )) s"
echo "t_row: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/t_row.txt | tail -1)"
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
timeout $(( $(left) - 7 )) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt adam,sgd \
  --timeline --variants=-,-@L2 --rounds 2 --reps 10 --steps 6 --json $OUT/steady.json > $OUT/steady.txt 2>&1
grep -v "^$\|Warning\|_warn_once" $OUT/steady.txt | head -110
timeout $(left) $C/bin/step_bound_probe 6 > $OUT/probe.txt 2>&1
grep "Adam" $OUT/probe.txt
echo "total: $(( $(date +%s) - t0 )) s"
