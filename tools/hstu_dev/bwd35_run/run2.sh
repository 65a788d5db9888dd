#!/bin/bash
# bwd35 (issue 39, session 32), run 2 (<= 50 s), from the root of main's tree:
#   OUT=/tmp/out_bwd35 timeout 56 bash .carry/bwd35/run2.sh
# (carry: bash tools/hstu_dev/bwd35_run/pack.sh /work/main/.carry/bwd35: the branch's wheel)
# Wheel: main's kernels + bwd_sm80_cfg=14 at D = 128 (bf16, heads first): the dQ workspace uninitialized, zeroed
# beside the loop by hstu_dq_zero_beside_kernel (16 CTAs, (sequence, head) items behind flags) while the loop
# (kPdsZeroWait, a programmatic dependent launch) runs on the other SMs; no fill before it.
# 1. time: cfg 0 / 14 / FA2 at B128 S1K, B64 S2K, B256 S512 D128 (heads first), median of 7, interleaved
# 2. torch.profiler: the kernels of one backward (cfg 0, cfg 14) at B128 S1K D128 with their device times
# 3. GPU tests: test_sm80_backward_zero_beside (cfg 14 against the reference and the default, poisoned workspace),
#    the one-barrier loop test's D = 128 cases (every cfg, bitwise dK / dV) and its kernel names
LIM=50
source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 14 python3 -P $B21 time --label $NAME --cfgs 0 14 --reps 7 \
    --impls ours fa2 --shapes B128:S1024:D128 B64:S2048:D128 B256:S512:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. prof ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 7 python3 -P $B21 prof --cfgs 0 14 --impls ours \
    --shapes B128:S1024:D128 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 2 )) $T::test_sm80_backward_zero_beside \
    $T::test_sm80_backward_one_barrier_runs_its_kernel $T::test_sm80_backward_one_barrier -k "zero or 128"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log 2>/dev/null) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log 2>/dev/null | cut -c1-220 | tail -10
grep -E "PASSED|FAILED" $OUT/tests.log 2>/dev/null | sed 's/\[.*//' | sort | uniq -c
echo "#### time (ms; cfg 0 = main's kernels, 14 = the workspace zeroed beside the loop)"
cut -c1-250 $OUT/time.log
echo "#### prof"
grep -E "^#### prof|^  " $OUT/prof.log | cut -c1-110 | head -16
# (where the cfg 14 loop's 40-byte spill sits: STL / LDL lines of its SASS against its HMMA range, and the default's)
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
SO=$(ls /tmp/site_$NAME/hstu_attn/_C*.so 2>/dev/null | head -1)
if [ -n "$CUOBJ" ] && [ -n "$SO" ] && [ $(left) -gt 2 ]; then
  for k in 69159 3623; do
    timeout 5 $CUOBJ -sass -fun "_ZN4hstu24hstu_bwd_pds_body_kernelI13__nv_bfloat16Li128ELi3ELi8ELi${k}EEEvNS_10HstuParamsEi" \
        $SO > $OUT/sass_$k.txt 2>&1
    echo "#### sass $k: $(grep -c '^        /\*[0-9a-f]*\*/' $OUT/sass_$k.txt) lines, HMMA $(grep -n HMMA $OUT/sass_$k.txt | sed -n '1p;$p' | cut -d: -f1 | tr '\n' ' ')"
    grep -n "STL\|LDL" $OUT/sass_$k.txt | cut -c1-90 | head -12
  done
  gzip -f $OUT/sass_*.txt
fi
