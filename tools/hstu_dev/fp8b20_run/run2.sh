#!/bin/bash
# fp8b20 (issue 36, session 19), run 2 (<= 40 s), from the root of main's tree (main 939d473 on the device):
#   OUT=/tmp/o_fp8b20 timeout 60 bash .carry/fp8b20/run2.sh > /tmp/o_fp8b20/stdout.txt 2>&1
# Run 1 printed nothing (every step hit its timeout: the processes' start-up). Same wheel (fp8b20 c1cd7f5), now one
# process for the benchmark + the tests (tools/drive.py: now tools/hstu_dev/fp8b21_run/drive.py, the same
# arguments), then main19's benchmark.
# The FP8 backward's path variants one at a time against the default (the option field at bits 59-60): pdl,
# dot_separate, lpt128 (the grid's pair groups of 128 CTAs: one pair per group at S16K).
set -u
export PYTHONUNBUFFERED=1 R=$PWD OUT=${OUT:-/tmp/o_fp8b20}
mkdir -p "$OUT"
C=$R/.carry/fp8b20
for sw in "/tmp/site_main $R/.carry/main19/whl" "/tmp/site_fp8b20 $C/whl"; do
  set -- $sw
  rm -rf "$1" && python3 -m pip install -q --no-deps --no-index --no-compile --target "$1" $2/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
done
echo "GPU: $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader) ($SECONDS s)"
echo "== 1. branch: benchmark, then GPU tests, one process ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b20 timeout 25 python3 -P tools/drive.py --reps 10 --no-dequant \
   --variants pdl,dot_separate,lpt128 -- -q -p no:cacheprovider --import-mode=importlib --tb=short -rfE \
   tests/hstu/test_fp8_bwd.py \
   -k "(variant_matches_the_kernel and block) or (variant_matches_emulating and causal) or refuses_a_variant or rows_outside" \
   > $OUT/drive.log 2>&1)
echo "rc $? ($SECONDS s)"
grep -v "^\.*$" $OUT/drive.log | grep -E "^\||drive|passed|failed|FAILED|ERROR|rror" | cut -c1-400
echo "== 2. main19 benchmark ($SECONDS s)"
PYTHONPATH=/tmp/site_main timeout $(( 40 - SECONDS > 8 ? 40 - SECONDS : 8 )) python3 -P benchmarks/hstu_fp8_bwd.py \
   --reps 6 --no-dequant --variants "" > $OUT/bench_main.md 2>&1
echo "rc $? ($SECONDS s)"
grep "^| B" $OUT/bench_main.md
echo "GPU after: $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader) (done at $SECONDS s)"
