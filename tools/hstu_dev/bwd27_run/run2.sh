#!/bin/bash
# bwd27 (issue 39, session 24), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd27 timeout 56 bash .carry/bwd27/run2.sh > /tmp/o_bwd27/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd27_run/pack.sh /work/main/.carry/bwd27)
# Wheel: the default's heads-first kernels (sm_90+, no contexts, up to 2,048 keys; bf16 and fp16) take the grid's
# last sequences, about one wave of CTAs (run 1's cfg 7 had two), key blocks first (kPdsTailBlocksFirst); cfg 7 now
# runs every sequence heads first (main's default kernels).
# 1. GPU tests: the whole test_sm80_backward_gpu.py and test_kernels_gpu.py's sm80 kernel-name tests, one process
# 2. time: the default / cfg 7 (main's kernels) / FA2 at B128 S1K D128, D64, D256 and B64 S2K D128 (interleaved
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
digest "cfg 0 = the branch's default (the tail's key blocks first); cfg 7 = every sequence heads first (main's kernels); main27 = main's wheel, own process"
