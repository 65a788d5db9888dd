#!/bin/bash
# bwd27 (issue 39, session 24), run 3 (<= 49 s; only if the lead offers a third run), from the root of main's tree:
#   OUT=/tmp/o_bwd27 timeout 56 bash .carry/bwd27/run3.sh > /tmp/o_bwd27/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd27_run/pack.sh /work/main/.carry/bwd27)
# Wheel: the final commit's: the default's heads-first kernels take the grid's last wave of sequences key blocks
# first at D = 64 / 256 only (kBwdPdsTailFirst; run 2's kernels); D = 128 main's kernel; cfg 7 the other choice at
# each D (D = 128: the tail order).
# 1. GPU tests: the whole test_sm80_backward_gpu.py and test_kernels_gpu.py's sm80 kernel-name tests, one process
# 2. time: the default / cfg 7 / FA2 at B128 S1K D128, D64, D256 and B64 S2K D128 (interleaved
#    rounds); then main27's wheel (cfg 0) in its own process (the time left)
LIM=49
MAIN=1
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 22 tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py -k "test_sm80_backward_gpu or \
runs_the_layout_that_fits or candidate_runs_its_kernel"
echo "== 2. time ($SECONDS s)"
SH="B128:S1024:D128 B128:S1024:D64 B128:S1024:D256 B64:S2048:D128"
PYTHONPATH=/tmp/site_$NAME timeout 11 python3 -P $B21 time --label $NAME --cfgs 0 7 --reps 5 --impls ours fa2 \
    --shapes $SH > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
if [ $(left) -gt 5 ]; then
  PYTHONPATH=/tmp/site_${NAME}_main timeout $(( $(left) - 1 )) python3 -P $B21 time --label main27 --cfgs 0 --reps 5 \
      --impls ours --shapes $SH >> $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
fi
digest "cfg 0 = the final default (D64 / D256 tail key blocks first, D128 main's); cfg 7 = the other choice; main27 = main's wheel, own process"
