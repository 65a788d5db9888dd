#!/bin/bash
# bwdw34 (issue 39, session 31), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/out_bwdw34 timeout 56 bash .carry/bwdw34/run1.sh
# (carry: bash tools/hstu_dev/bwdw34_run/pack.sh /work/main/.carry/bwdw34)
# Wheel: main's kernels (the D = 256 default's SASS identical to main's) + bwd_sm80_cfg=13 at D = 256 (bf16): the
# default's mbarrier loop with S / dP split over the head dim across warp pairs (kPdsKSplitS).
# 1. time: cfg 0 / 13 / FA2 at B16 S4K D256 (batch first) and B128 S1K D256 (heads first), median of 7, interleaved
# 2. GPU tests: test_sm80_backward_ksplit (cfg 13 against the fp32 reference and the default, both grid orders),
#    the kernel each cfg runs at D = 256, then the loop test's D = 256 cases (every cfg)
# 3. compute-sanitizer racecheck of cfg 13's heads-first kernel on two sequences (the time left)
LIM=49 NAME=bwdw34 BASE=main34
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 13 --reps 7 \
    --impls ours fa2 --shapes B16:S4096:D256 B128:S1024:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 14 ? $(left) - 10 : 4 )) $T::test_sm80_backward_ksplit \
    $T::test_sm80_backward_one_barrier_runs_its_kernel $T::test_sm80_backward_one_barrier -k "ksplit or 256"
echo "== 3. racecheck ($SECONDS s)"
if [ $(left) -gt 4 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) $CS --tool racecheck --racecheck-report hazard \
      --kernel-name "regex:Li33770E|33770>" python3 -P $C/racecase34.py > $OUT/san.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/san.log
fi
digest "cfg 0 = the default (main's D = 256 kernel); 13 = S / dP split over D across warp pairs"
echo "#### racecheck"
grep -E "hazard|RACECHECK|ERROR SUMMARY|cfg 13|rc " $OUT/san.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
