#!/bin/bash
# bwd36 (issue 39, session 33), run 3 = the final one (<= 50 s), from the root of main's tree:
#   OUT=/tmp/out_bwd36 timeout 56 bash .carry/bwd36/run3.sh
# (carry: bash tools/hstu_dev/bwd36_run/pack.sh /work/main/.carry/bwd36 WHEEL, WHEEL from mkwheel.sh)
# Wheel: main's kernels + bwd_sm80_cfg=14 at D = 128 / 6 at D = 64 (bf16, sm_90+, no contexts): the default's loop with
# the wholly masked phase-1 warp tiles skipped (kPdsDeadSkip: votes, a rolled skip path) and phase 2's scheduler pairs
# on keys 64 apart (kPdsKvRot); at D = 128 cfg 13 the skip without the rotation, cfg 15 the rotation alone. Runs 1 / 2
# (unrolled skip path) measured cfg 14 +0.9 / -0.8 % at B128 S1K, +7.2 / +6.1 % at B16 S16K: which part costs at S16K
# is what 13 / 14 / 15 say.
# 1. time: cfg 0 (main's path) / 14 / 13 / 15 (D = 128) or 6 (D = 64) / FA2 (the product benchmark's call) at B128
#    S1K D128, B16 S16K D128, B16 S8K D64, interleaved, L2 flushed, median of 9, best of 2 rounds
# 2. GPU tests: test_sm80_backward_dead_skip (D = 64 / 128), the kernel names at D = 64 / 128, the one-barrier loop
#    test's D = 128 jagged causal case (every cfg bitwise the default's)
# 3. the SASS of the new loops (spill places)
LIM=50
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 20 python3 -P $T36 time --bench $R/benchmarks --alt 64:6,128:14/13/15 --reps 9 \
    --rounds 2 --shapes B128:S1024:D128 B16:S16384:D128 B16:S8192:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 12 ? $(left) - 10 : 2 )) $T::test_sm80_backward_dead_skip \
    "$T::test_sm80_backward_one_barrier_runs_its_kernel[64]" "$T::test_sm80_backward_one_barrier_runs_its_kernel[128]" \
    $T::test_sm80_backward_one_barrier -k "dead or runs_its or (128 and jagged and causal)"
# (where the new loops' spills sit: STL / LDL lines of their SASS against the HMMA range, beside main's loop's)
SO=$(ls /tmp/site_$NAME/hstu_attn/_C*.so 2>/dev/null | head -1)
if [ -n "$CUOBJ" ] && [ -n "$SO" ] && [ $(left) -gt 1 ]; then
  for k in 128:3:3623 128:3:200231 128:3:200199 128:3:69127; do
    IFS=: read d st b <<< "$k"
    timeout 4 $CUOBJ -sass -fun "_ZN4hstu24hstu_bwd_pds_body_kernelI13__nv_bfloat16Li${d}ELi${st}ELi8ELi${b}EEEvNS_10HstuParamsEi" \
        $SO > $OUT/sass_$b.txt 2>&1
    echo "sass $b: $(grep -c '^        /\*[0-9a-f]*\*/' $OUT/sass_$b.txt) lines, HMMA $(grep -n HMMA $OUT/sass_$b.txt | sed -n '1p;$p' | cut -d: -f1 | tr '\n' ' ')"
    grep -n "STL\|LDL" $OUT/sass_$b.txt | sed 's/  */ /g' | cut -c1-60 | head -6
  done
  gzip -f $OUT/sass_*.txt
fi > $OUT/sass.log 2>&1
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-220 | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log 2>/dev/null | sed 's/\[.*//' | sort | uniq -c
echo "#### time (ms; cfg 0 = main's path; 14 / 6 = skip + rotation at D = 128 / 64, 13 = skip alone, 15 = rotation alone)"
cut -c1-300 $OUT/time.log
echo "#### sass (STL / LDL lines; HMMA first / last line)"
cut -c1-100 $OUT/sass.log 2>/dev/null | head -24
