#!/bin/bash
# Copies what bwd24's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd24_run/pack.sh /work/main/.carry/bwd24 [--no-wheel]
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
[ "${2:-}" = --no-wheel ] || cp bazel-bin/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd24_run/{run*.sh,setup.sh,prof24.py} $C/
cp tools/hstu_dev/bwd15_run/setup.sh $C/setup15.sh
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
