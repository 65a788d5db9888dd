#!/bin/bash
# fp8b17 (issue 36, session 16), run 3 (<= 58 s): the final code, from the root of main's tree (main d8b2e85):
#   OUT=/tmp/o_fp8b17 timeout 75 bash .carry/fp8b17/run3.sh > /tmp/o_fp8b17/stdout.txt 2>&1
# The branch's final wheel: the FP8 backward kernel's new default (kFp8BwdDefault: the factor prefetch, the mask
# compares, stmatrix dS8, spec-q; diag 15360 = session 13's kernel, main's).
# 1. GPU tests: tests/hstu/test_fp8_bwd.py (the whole file), test_fp8.py's dequantized-backward selection
# 2. benchmarks/hstu_fp8_bwd.py --reps 6 (the branch's script and wheel: kernel = the new default, variant = 15360),
#    then main16's wheel with main's script (--reps 6), the headline comparison
LIM=58 WITH_MAIN=1 source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_fp8b17 timeout 22 python3 -P -m pytest -v -p no:cacheprovider \
    --import-mode=importlib --tb=short -rfE --durations=8 tests/hstu/test_fp8_bwd.py > $OUT/tests.log 2>&1)
echo "rc $? ($SECONDS s)"
(cd $R && PYTHONPATH=/tmp/site_fp8b17 timeout 7 python3 -P -m pytest -q -p no:cacheprovider \
    --import-mode=importlib --tb=short -rfE tests/hstu/test_fp8.py -k "dequant_path and 128 and block" \
    > $OUT/tests_fp8.log 2>&1)
echo "rc $? ($SECONDS s)"
echo "== 2. benchmark ($SECONDS s)"
PYTHONPATH=/tmp/site_fp8b17 timeout 13 python3 -P $C/tree/benchmarks/hstu_fp8_bwd.py --reps 6 > $OUT/bench.md 2>&1
echo "rc $? ($SECONDS s)"
if [ "$(left)" -gt 6 ]; then
  PYTHONPATH=/tmp/site_fp8b17_main timeout $(( $(left) - 1 )) python3 -P $R/benchmarks/hstu_fp8_bwd.py --reps 6 \
      > $OUT/bench_main.md 2>&1
  echo "rc $? ($SECONDS s)"
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests $OUT/tests.log
grep -E "s call" $OUT/tests.log | head -8 | cut -c1-200
digest_tests $OUT/tests_fp8.log
digest_tables "benchmark (branch: kernel = the new default, variant = 15360, session 13's kernel)" $OUT/bench.md
digest_tables "benchmark (main16's wheel and script)" $OUT/bench_main.md
