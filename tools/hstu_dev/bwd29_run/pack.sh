#!/bin/bash
# Copies what bwd29's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd29_run/pack.sh /work/main/.carry/bwd29
# (the run scripts source bwd28_run/setup.sh with NAME=bwd29, BASE=main29)
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
cp bazel-bin/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd29_run/run*.sh tools/hstu_dev/bwd28_run/{setup.sh,count28.py} tools/hstu_dev/bwd27_run/count27.py \
    tools/hstu_dev/bwd21_run/bwd21.py tools/hstu_dev/bwd80_run/time80.py $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
