#!/bin/bash
# fp8b33 run 1 (issue 36, session 30): the FP8 backward's path outside its kernel. The branch's wheel: the pre-pass
# launched first and safe before the validation (offsets clamped, every row / column bounded), its transposes'
# 144-byte tile at D <= 128, and the finishing pass's dq groups put back in registers (a quad's shuffles, 4 groups a
# block, loads first); option bit 60 main_path = main 0bb35f74's path. Tests: test_fp8_bwd.py -k "(main_path and not
# emulating) or bad_int32 or refuses_a_variant or rows_outside or graph_capture or cuda_prepass" (the pre-pass
# bit-equal to its reference, main_path against the default, the bad vectors). Then the headline's benchmark
# (benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant --variants main_path,default: one process, random order).
# `OUT=DIR timeout 56 bash .carry/fp8b33/run1.sh` from the root of main's tree (carry: fp8b33_run/pack.sh).
NAME=fp8b33 BASE=main33
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 19 "(main_path and not emulating) or bad_int32 or refuses_a_variant or rows_outside or graph_capture or \
    cuda_prepass" \
    tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout $(( 51 - SECONDS )) python3 -P benchmarks/hstu_fp8_bwd.py --reps 50 --no-dequant \
    --variants main_path,default > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8_bwd.py [.sFE]*' $OUT/tests.log | tail -1)"
grep "^| B\|^| case\|rror" $OUT/bench.log | cut -c1-400
echo "fp8b33 run 1 done at $SECONDS s"
