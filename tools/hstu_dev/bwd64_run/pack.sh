#!/bin/bash
# Copies what bwd64's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd64_run/pack.sh /work/main/.carry/bwd64 [WHEEL_DIR]   (default: bazel-bin)
set -eu
C=$1
W=${2:-bazel-bin}
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
cp $W/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd64_run/run*.sh tools/hstu_dev/bwd80_run/time80.py $C/
cp tools/hstu_dev/bwd15_run/setup.sh $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
