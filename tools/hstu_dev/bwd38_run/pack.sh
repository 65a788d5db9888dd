#!/bin/bash
# Copies what bwd38's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd38_run/pack.sh /work/main/.carry/bwd38 [WHEEL]
# the branch's hstu_attn wheel (WHEEL, default mkwheel.sh's: main38's wheel with the branch's _C.so), the run scripts
# and setup, carry_setup.sh, t38.py (the timer), and under tree/ the test files.
set -eu
C=$1
D=tools/hstu_dev
rm -rf $C/whl $C/tree
mkdir -p $C/whl $C/tree/tests/hstu
cp ${2:-/tmp/bwd38_obj/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl} $C/whl/
cp $D/bwd38_run/{run*.sh,setup.sh,t38.py} $D/carry_setup.sh $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py} $C/tree/tests/hstu/
du -sh $C
