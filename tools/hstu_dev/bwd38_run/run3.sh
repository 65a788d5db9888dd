#!/bin/bash
# bwd38 (issue 39, session 35), run 3 (<= 52 s; the last), from the root of main's tree:
#   OUT=/tmp/out_bwd38 timeout 56 bash .carry/bwd38/run3.sh
# (carry: bash tools/hstu_dev/bwd38_run/pack.sh /work/main/.carry/bwd38 WHEEL, WHEEL from mkwheel.sh)
# Wheel: main38's kernels + kernel_options(fwd_sm80_cfg=13) ("claim": the dQ workspace not zeroed by the op, each
# warp's block of a dQ tile claimed, kPdsDqClaim; the CAS relaxed, its broadcast now tied to the dQ k-loop's last
# accumulator: run 2's SHFL sat two HMMAs after the CAS; D = 256 heads first only) and + bwd_sm80_cfg=14 ("late":
# D = 128's claims published at the next block barrier).
# 1. time + prof (one process): main's path / claim / late / FA2 at B128 S1K D128, B256 S256 D256, B128 S1K D256,
#    B256 S512 D128, B16 S16K D128 (batch first), B16 S4K D256 (claims not applied: main's path); profiles at the
#    first two
# 2. the SASS of the claim loops: where the CAS and the SHFL sit (instruction distance)
# 3. GPU tests: test_sm80_backward_dq_claims (bf16 D = 128 / 256 first, then the fallbacks)
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. time + prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME:$PEER timeout 23 python3 -P $T38 time --bench $R/benchmarks --variants main claim late \
    $PEER_ARG --reps 5 --shapes B128:S1024:D128 B256:S256:D256 B128:S1024:D256 B256:S512:D128 B16:S16384:D128 \
    B16:S4096:D256 --prof-shapes B128:S1024:D128 B256:S256:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. sass ($SECONDS s)"
SO=$(ls /tmp/site_$NAME/hstu_attn/_C*.so 2>/dev/null | head -1)
if [ -n "$CUOBJ" ] && [ -n "$SO" ]; then
  for k in 128:3:1052199 256:2:1082346; do
    IFS=: read d st b <<< "$k"
    timeout 4 $CUOBJ -sass -fun "_ZN4hstu24hstu_bwd_pds_body_kernelI13__nv_bfloat16Li${d}ELi${st}ELi8ELi${b}EEEvNS_10HstuParamsEi" \
        $SO > $OUT/sass_$b.txt 2>&1
    c=$(grep -n "CAS" $OUT/sass_$b.txt | head -1 | cut -d: -f1)
    h=$(grep -n "SHFL.IDX" $OUT/sass_$b.txt | awk -F: -v c=${c:-0} '$1 > c {print $1; exit}')
    m=$(awk -v c=${c:-0} -v h=${h:-0} 'NR > c && NR < h && /HMMA/' $OUT/sass_$b.txt | wc -l)
    echo "sass $d $b: CAS at line $c, its SHFL at $h ($(( (${h:-0} - ${c:-0}) / 2 )) instructions, $m HMMA between)"
  done > $OUT/sass.log 2>&1
  gzip -f $OUT/sass_[0-9]*.txt
fi
echo "== 3. GPU tests ($SECONDS s)"
gpu_tests $(( $(left) > 6 ? $(left) - 2 : 3 )) tests/hstu/test_sm80_backward_gpu.py -k dq_claims  # (bf16 D 128, 256 first)
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (ms; main = main's path (the op's fill), claim = fwd_sm80_cfg=13, late = + bwd_sm80_cfg=14; x: FA2 / ours)"
grep -v "^####\|^ \|Warning\|_warn" $OUT/time.log | cut -c1-330 | tail -7
digest_gpu_tests
echo "#### prof (us)"
grep -E "^#### prof|FillFunctor|hstu_bwd_pds|convert|memset|Memset" $OUT/time.log | cut -c1-112 | head -24
echo "#### sass"
cat $OUT/sass.log 2>/dev/null | cut -c1-160
