#!/bin/bash
# fp8b17 (issue 36, session 16), run 2 (<= 57 s), from the root of main's tree (main d8b2e85 on the device):
#   OUT=/tmp/o_fp8b17 timeout 75 bash .carry/fp8b17/run2.sh > /tmp/o_fp8b17/stdout.txt 2>&1
# The branch's wheel (its diag 0 = main's kernel, SASS identical) with the variants of hstu_bwd_fp8_sm90.h: 1024
# stmatrix dS8, 2048 spec-q (dS8 kept in registers), 4096 prefetch (factors with the tile), 8192 mask-fast, 16384
# LPT grid; 13312 = 4096 + 8192 + 1024, 15360 = those four, 31744 = all five. main16's wheel for the benchmark.
# 1. GPU tests: every variant against the kernel (block descale, 5 masks), the diag list, 31744 against the fp64
#    emulation (block, 5 masks)
# 2. split: the op alone, diag 0 / 1024 / 2048 / 3072 / 4096 / 8192 / 13312 / 15360 / 16384 / 31744, S16K, S4K
# 3. benchmarks/hstu_fp8_bwd.py (the branch's) with the branch's wheel: bf16, dequant, pre-pass, kernel (= main's),
#    variant 31744; then main16's wheel (S16K, its own script) if time is left
LIM=57 WITH_MAIN=1 source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b17 timeout 16 python3 -P -m pytest -v -p no:cacheprovider \
    --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8_bwd.py \
    -k "(variant_matches and block) or diag_not_built or (close_variant and spec_q_all_lpt and block)" \
    > $OUT/tests.log 2>&1)
echo "rc $? ($SECONDS s)"
echo "== 2. split ($SECONDS s)"
PYTHONPATH=/tmp/site_fp8b17 timeout 10 python3 -P $C/fp8_bwd_split.py --reps 5 \
    --diags 0,1024,2048,3072,4096,8192,13312,15360,16384,31744 > $OUT/split.md 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. benchmark ($SECONDS s)"
PYTHONPATH=/tmp/site_fp8b17 timeout 14 python3 -P $C/tree/benchmarks/hstu_fp8_bwd.py --reps 6 --variant 31744 \
    > $OUT/bench.md 2>&1
echo "rc $? ($SECONDS s)"
if [ "$(left)" -gt 8 ]; then
  PYTHONPATH=/tmp/site_fp8b17_main timeout $(( $(left) - 1 )) python3 -P $R/benchmarks/hstu_fp8_bwd.py --quick \
      --reps 6 > $OUT/bench_main.md 2>&1
  echo "rc $? ($SECONDS s)"
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests $OUT/tests.log
digest_tables "split (op alone, ms)" $OUT/split.md
digest_tables "benchmark (branch wheel: kernel = main's kernel, variant = 31744)" $OUT/bench.md
digest_tables "benchmark (main16 wheel and script, S16K)" $OUT/bench_main.md
