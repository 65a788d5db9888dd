#!/bin/bash
# bwd26 (issue 39, session 23), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd26 timeout 56 bash .carry/bwd26/run2.sh > /tmp/o_bwd26/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd26_run/pack.sh /work/main/.carry/bwd26)
# Wheel: D = 256's default on sm_90+ (calls without contexts) is the one-barrier loop with two Q / dO stages on
# mbarriers and the lean copies (run 1's cfg 7); cfg 1 the two-barrier kernels (main's default), cfg 6 the loop
# without the lean copies (run 1's cfg 6).
# 1. GPU tests: test_sm80_backward_gpu.py's and test_kernels_gpu.py's D = 256 sm80 tests (bf16 and fp16), one process
# 2. time: the default / cfg 1 (main's kernels) / cfg 6 / FA2 at B16 S4K D256, B128 S1K D256 (interleaved rounds)
# 3. compute-sanitizer racecheck of the default and cfg 6 on a small case (the time left)
LIM=49
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 24 tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py -k "(test_sm80_backward_gpu and \
(256 or mbar)) or (test_kernels_gpu and 256 and (sm80_backward_fa2_layout or sm80_d256 or candidate_runs_its_kernel))"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 0 1 6 --reps 5 --impls ours fa2 \
    --shapes B16:S4096:D256 B128:S1024:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. racecheck ($SECONDS s)"
if [ $(left) -gt 5 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) $CS --tool racecheck --kernel-name "regex=Li234E|Li106E" \
      python3 -P $C/racecase.py > $OUT/san.log 2>&1
  echo "rc $? ($SECONDS s)" | tee -a $OUT/san.log
fi
digest "cfg 0 = the branch's default (one barrier, mbarriers, lean copies); cfg 1 = main's two-barrier kernels; cfg 6 = one barrier without the lean copies"
