#!/bin/bash
# Copies what bwd36's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd36_run/pack.sh /work/main/.carry/bwd36 [WHEEL]
# the branch's hstu_attn wheel (bazel-bin's, or WHEEL: main's wheel with the branch's _C.so, its changed kernel
# units compiled and linked with main's other objects by hand: mkwheel.sh), the run scripts and setup,
# carry_setup.sh, t36.py (the timer), and under tree/ the test files.
set -eu
C=$1
D=tools/hstu_dev
rm -rf $C/whl $C/tree
mkdir -p $C/whl $C/tree/tests/hstu
cp ${2:-bazel-bin/hstu_attn-*.whl} $C/whl/
cp $D/bwd36_run/{run*.sh,setup.sh,t36.py} $D/carry_setup.sh $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py} $C/tree/tests/hstu/
du -sh $C
