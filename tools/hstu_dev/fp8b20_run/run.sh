#!/bin/bash
# fp8b20 (issue 36, session 19), run 1 (<= 40 s), from the root of main's tree (main 939d473 on the device):
#   OUT=/tmp/o_fp8b20 timeout 60 bash .carry/fp8b20/run.sh > /tmp/o_fp8b20/stdout.txt 2>&1
# Wheel of fp8b20 c1cd7f5. The FP8 backward's path variants one at a time against the default (the option field at bits 59-60): pdl,
# dot_separate, lpt128 (the grid's pair groups of 128 CTAs: one pair per group at S16K); plain_kernel is gone.
# 1. GPU tests (branch's tests/hstu/test_fp8_bwd.py, a selection), 2. the branch's benchmark (default + 3 variants,
# one process), 3. main19's benchmark (its default), own process.
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b20}
mkdir -p "$OUT"
C=$R/.carry/fp8b20
for sw in "/tmp/site_main $R/.carry/main19/whl" "/tmp/site_fp8b20 $C/whl"; do
  set -- $sw
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
done
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
echo "== 1. GPU tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b20 timeout 12 python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib \
   --tb=short -rfE tests/hstu/test_fp8_bwd.py \
   -k "(variant_matches_the_kernel and block) or (variant_matches_emulating and causal) or refuses_a_variant or rows_outside" \
   > $OUT/tests.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -12 | cut -c1-300
echo "== 2. branch benchmark ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b20 timeout 13 python3 -P benchmarks/hstu_fp8_bwd.py --reps 12 --no-dequant \
   --variants pdl,dot_separate,lpt128 > $OUT/bench_branch.md 2>&1)
echo "rc $? ($SECONDS s)"
cat $OUT/bench_branch.md
echo "== 3. main19 benchmark ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout 10 python3 -P benchmarks/hstu_fp8_bwd.py --reps 8 --no-dequant --variants "" \
   > $OUT/bench_main.md 2>&1
echo "rc $? ($SECONDS s)"
cat $OUT/bench_main.md
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
