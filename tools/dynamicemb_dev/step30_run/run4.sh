#!/bin/bash
# step30 run 4 (issue 35): the final wheel's tests only (run 3 cut its processes at 24 s: 13 of the plain-SGD kernel
# tests passed before the cap, the step counter's and the compiled step's did not run). Three processes with the
# whole budget: the step counter in the update against the add (none / sum), the compiled SGD steps (aot_eager),
# the direct-SGD kernel tests against the CPU path for 4-wide rows (sum / mean / none).
B=48
RUN=step30
. .carry/step30/setup.sh
timeout 42 $PT $T -k "sgd_step_counter" > $OUT/t_bump.txt 2>&1 & p1=$!
timeout 42 $PT $K -k "compiled_training_step_matches_eager and aot_eager and sgd" > $OUT/t_comp.txt 2>&1 & p2=$!
timeout 42 $PT $T -k "kernels_match_cpu_path and sgd and not wd and not norm and vec4 and not wide" > $OUT/t_vec4.txt 2>&1 & p3=$!
for p in $p1 $p2 $p3; do wait $p; echo "rc $?"; done
for f in t_bump t_comp t_vec4; do
  echo "$f: $(grep -E '[0-9]+ (passed|failed|error|skipped)' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A12 "^E  " $OUT/t_*.txt | head -30
echo "total: $(( $(date +%s) - t0 )) s"
