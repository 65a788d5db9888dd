#!/bin/bash
# bwd38 (issue 39, session 35), run 2 (<= 52 s), from the root of main's tree:
#   OUT=/tmp/out_bwd38 timeout 56 bash .carry/bwd38/run2.sh
# (carry: bash tools/hstu_dev/bwd38_run/pack.sh /work/main/.carry/bwd38 WHEEL, WHEEL from mkwheel.sh)
# Wheel: main38's kernels + kernel_options(fwd_sm80_cfg=13) ("claim": the dQ workspace not zeroed by the op, each
# warp's block of a dQ tile claimed, kPdsDqClaim; the CAS now relaxed: run 1's acquire CAS ran the loop 11 % longer)
# and + bwd_sm80_cfg=14 ("late": at D = 128 the claims published at the next block barrier, the pending block in
# shared memory; at D = 256 as claim: run 1's late loop hung there, phase 1's pair barriers).
# 1. time + prof (one process: the python start and the profiler's cost ~5 s each): main's path / claim / late / FA2
#    at B128 S1K D128, B256 S256 D256, B128 S1K D256, B16 S4K D256; every kernel of one backward at the first two
# 2. the SASS of the claim loops: MEMBAR / ATOM / CCTL / RED / STG counts against main's loop
# 3. GPU tests: test_sm80_backward_dq_claims, bf16 D = 128 / 256 (the rest if time is left)
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. time + prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME:$PEER timeout 22 python3 -P $T38 time --bench $R/benchmarks --variants main claim late \
    $PEER_ARG --reps 5 --shapes B128:S1024:D128 B256:S256:D256 B128:S1024:D256 B16:S4096:D256 \
    --prof-shapes B128:S1024:D128 B256:S256:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. sass ($SECONDS s)"
SO=$(ls /tmp/site_$NAME/hstu_attn/_C*.so 2>/dev/null | head -1)
if [ -n "$CUOBJ" ] && [ -n "$SO" ]; then
  for k in 128:3:3623 128:3:1052199 128:3:3149351 256:2:33770 256:2:1082346; do
    IFS=: read d st b <<< "$k"
    timeout 4 $CUOBJ -sass -fun "_ZN4hstu24hstu_bwd_pds_body_kernelI13__nv_bfloat16Li${d}ELi${st}ELi8ELi${b}EEEvNS_10HstuParamsEi" \
        $SO > $OUT/sass_$b.txt 2>&1
    echo "sass $d $b: $(grep -c '^        /\*[0-9a-f]*\*/' $OUT/sass_$b.txt) lines, MEMBAR $(grep -c MEMBAR $OUT/sass_$b.txt)" \
        "ATOM $(grep -c 'ATOM' $OUT/sass_$b.txt) CCTL $(grep -c CCTL $OUT/sass_$b.txt) RED $(grep -c ' RED' $OUT/sass_$b.txt)" \
        "STG $(grep -c 'STG' $OUT/sass_$b.txt) LDL $(grep -c 'LDL' $OUT/sass_$b.txt)"
    grep -B3 -A6 "ATOM\|MEMBAR" $OUT/sass_$b.txt | sed 's/  */ /g' | cut -c1-90 | head -30 > $OUT/sass_ctx_$b.txt
  done > $OUT/sass.log 2>&1
  gzip -f $OUT/sass_[0-9]*.txt
fi
echo "== 3. GPU tests ($SECONDS s)"
gpu_tests $(( $(left) > 6 ? $(left) - 2 : 3 )) tests/hstu/test_sm80_backward_gpu.py \
    -k "dq_claims and bf16 and (128 or 256) and (causal or target_group or none)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; main = main's path (the op's fill), claim = fwd_sm80_cfg=13, late = + bwd_sm80_cfg=14; x: FA2 / ours)"
grep -v "^####\|^ " $OUT/time.log | cut -c1-330 | tail -6
digest_gpu_tests
echo "#### prof (us)"
grep -E "^#### prof|FillFunctor|hstu_bwd_pds|convert|memset|Memset" $OUT/time.log | cut -c1-112 | head -24
echo "#### sass"
cat $OUT/sass.log 2>/dev/null | cut -c1-160
