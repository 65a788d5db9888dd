#!/bin/bash
# bwd38 (issue 39, session 35), run 2 (<= 52 s), from the root of main's tree:
#   OUT=/tmp/out_bwd38 timeout 56 bash .carry/bwd38/run2.sh
# (carry: bash tools/hstu_dev/bwd38_run/pack.sh /work/main/.carry/bwd38 WHEEL, WHEEL from mkwheel.sh)
# Wheel: main38's kernels + kernel_options(fwd_sm80_cfg=13) ("claim": the dQ workspace not zeroed by the op, each
# warp's block of a dQ tile claimed, kPdsDqClaim) and + bwd_sm80_cfg=14 ("late": the claims published at the next
# block barrier, the pending block in shared memory; run 1's register copy spilled 28-36 B).
# 1. time: main's path / claim / late / FA2 / the peer, the short shapes of issue 39 (one process, best of 2 rounds)
# 2. GPU tests: test_sm80_backward_dq_claims (all: bf16 D = 128 / 256, the fallbacks fp16, D = 64, rab, contexts)
# 3. prof: every kernel of one backward, main / claim / late at B128 S1K D128 and B256 S256 D256; main38's own wheel
#    (its convert) at B128 S1K D128
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME:$PEER timeout 20 python3 -P $T38 time --bench $R/benchmarks --variants main claim late \
    $PEER_ARG --reps 7 --rounds 2 --shapes B128:S1024:D128 B256:S256:D256 B128:S1024:D256 B256:S512:D128 \
    B16:S4096:D256 B16:S4096:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
gpu_tests $(( $(left) > 12 ? $(left) - 9 : 3 )) tests/hstu/test_sm80_backward_gpu.py -k dq_claims
echo "== 3. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 6 python3 -P $T38 prof --bench $R/benchmarks --variants main claim late \
    --no-fa2 --shapes B128:S1024:D128 B256:S256:D256 > $OUT/prof.log 2>&1
PYTHONPATH=/tmp/site_main timeout $(( $(left) > 3 ? $(left) - 1 : 2 )) python3 -P $T38 prof --bench $R/benchmarks \
    --variants main --no-fa2 --shapes B128:S1024:D128 > $OUT/prof_main38.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; main = main's path (the op's fill), claim = fwd_sm80_cfg=13, late = + bwd_sm80_cfg=14; x: the other / ours)"
grep -v "^####" $OUT/time.log | cut -c1-330 | tail -8
echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-220 | tail -6
echo "#### prof (us)"
grep -E "^####|FillFunctor|hstu_bwd_pds|convert|memset|Memset" $OUT/prof.log | cut -c1-100 | head -24
grep -E "^####|convert" $OUT/prof_main38.log | cut -c1-100 | head -3
