#!/usr/bin/env bash
# fp8f21 run 3 (<= 30 s): the GPU tests of the branch's final code. Runs 1-2 measured the lab variants (none made the
# default: docs/hstu_attn.md), so the final FP8 forward is main's (its _C.so byte-identical to main20's wheel); this
# runs test_fp8.py's GPU tests (-m gpu, 4 pytest-xdist workers: the fp64 references are CPU-bound) with that wheel.
# (Run 3 on the device: 1 passed in 26 s, the 4 workers' fp64 references thrashed the CPU; serial selections fit.)
LIM=30
NAME=fp8f21 MAIN=main20
source $PWD/tools/hstu_dev/bwd15_run/setup.sh
echo "== tests ($SECONDS s)"
gpu_tests 26 tests/hstu/test_fp8.py -m gpu -n 4 --maxfail=30
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/.*test_fp8.py::/test_fp8.py::/; s/\[.*//; s/ *PASSED.*//' | sort | uniq -c
echo "== end ($SECONDS s)"
