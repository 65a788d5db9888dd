#!/bin/bash
# Copies what bwd22's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd22_run/pack.sh /work/main/.carry/bwd22
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
cp bazel-bin/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd22_run/{run*.sh,setup.sh,memcheck_case.py} $C/
cp tools/hstu_dev/bwd15_run/setup.sh $C/setup15.sh
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
