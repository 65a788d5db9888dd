#!/bin/bash
# (The record of session 23's run 1, on step26 6f5c246's wheel; variants 3-5 were removed after it.)
# step26 run 1: the find by a probe of every id on the side stream from the step's start (lab op
# _lookup_lab_find_later 3 / 4 / 5: a block per chunk of 1,024 ids, one / two blocks per SM), the number pass taking
# its claimers' slots from it. GPU tests in parallel (the variants bitwise against the number pass's find, CPU
# parity / CUDA graphs / no host sync / repeatability / bad inputs with the probe forced on), then steady_ab (SGD,
# Adam: main's code path "-" and F3 / F4 / F5 in one process), then main26's wheel in its own process if time is left.
B=49
. .carry/step26/setup.sh
timeout 17 $PT $T -k "find_probe_variants_agree or (csr_sort_variants_agree and 200)" > $OUT/t_variants.txt 2>&1 & p1=$!
timeout 17 $PT $T -k "csr_sort_variants_agree and 40000" > $OUT/t_csr40k.txt 2>&1 & p2=$!
timeout 17 $PT --find-lab 3 $T -k "test_gpu_matches_cpu" > $OUT/t_cpu_f3.txt 2>&1 & p3=$!
timeout 17 $PT --find-lab 4 $T $R -k "cuda_graph or host_sync or repeatable" > $OUT/t_graph_f4.txt 2>&1 & p4=$!
timeout 17 $PT --find-lab 5 $K -k "bad_input and not compiled" > $OUT/t_bad_f5.txt 2>&1 & p5=$!
timeout 17 $PT $T -k "test_gpu_matches_cpu or dedup_insert_variants" > $OUT/t_default.txt 2>&1 & p6=$!
for p in $p1 $p2 $p3 $p4 $p5 $p6; do wait $p; echo "rc $?"; done
echo "tests: $(( $(date +%s) - t0 )) s"
for f in t_variants t_csr40k t_cpu_f3 t_graph_f4 t_bad_f5 t_default; do
  echo "$f: $(grep -E 'passed|failed|error' $OUT/$f.txt | tail -1)"
done
grep -h -B2 -A25 "^____\|Error\|assert " $OUT/t_*.txt | head -60
timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py --bench benchmarks --opt sgd,adam \
  --variants=-,-@F3,-@F4,-@F5 --rounds 2 --reps 15 --steps 6 --json $OUT/steady.json 2>&1 | tee $OUT/steady.txt
echo "branch done: $(( $(date +%s) - t0 )) s"
if [ "$(left)" -gt 9 ]; then
  python3 -m pip install -q --no-deps --no-index --no-compile --target $M .carry/main26/whl/dynamicemb-*.whl
  PYTHONPATH=$M:$C/tree/tools/dynamicemb_dev timeout $(left) python3 -P $C/tree/tools/dynamicemb_dev/steady_ab.py \
    --bench benchmarks --opt sgd,adam --variants=- --rounds 2 --reps 15 --steps 6 --label main26 2>&1 \
    | tee $OUT/steady_main.txt
fi
echo "total: $(( $(date +%s) - t0 )) s"
