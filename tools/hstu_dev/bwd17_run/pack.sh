#!/bin/bash
# Copies what bwd17's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd17_run/pack.sh /work/main/.carry/bwd17
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
cp bazel-bin/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd17_run/{run2.sh,time17.py,prof17.py,ncu17.py} $C/ 2>/dev/null || true
cp tools/hstu_dev/bwd15_run/setup.sh $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
