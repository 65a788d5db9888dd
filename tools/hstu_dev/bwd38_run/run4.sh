#!/bin/bash
# bwd38 (issue 39, session 35), run 4 (optional, <= 25 s; not requested: the helper's three scripts are spent), from
# the root of main's tree:   OUT=/tmp/out_bwd38 timeout 56 bash .carry/bwd38/run4.sh
# Wheel: the final commit c4638f9f (claims heads first only at D = 128 / 256, the late publication removed).
# 1. GPU tests: test_sm80_backward_dq_claims (28 cases)   2. time: main's path / claim / FA2 at B128 S1K D128, B256 S256
# D256, B16 S16K D128 (batch first: now the fill path, expect 0 %)
LIM=25
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 13 tests/hstu/test_sm80_backward_gpu.py -k dq_claims
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) > 4 ? $(left) - 1 : 3 )) python3 -P $T38 time --bench $R/benchmarks \
    --variants main claim --reps 5 --shapes B128:S1024:D128 B256:S256:D256 B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_gpu_tests
echo "#### time (ms)"
grep -v "^####" $OUT/time.log | cut -c1-300 | tail -4
