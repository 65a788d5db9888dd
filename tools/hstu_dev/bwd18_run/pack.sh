#!/bin/bash
# Copies what bwd18's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd18_run/pack.sh /work/main/.carry/bwd18
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
cp bazel-bin/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd18_run/run*.sh $C/
cp tools/hstu_dev/bwd15_run/setup.sh $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
