#!/bin/bash
# Copies what bwdfa39's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwdfa39_run/pack.sh /work/main/.carry/bwdfa39 [WHEEL]
# the branch's hstu_attn wheel (WHEEL; none: the scripts use main39's), the run scripts and setup, carry_setup.sh,
# t39.py (the timer), ncu_digest.py, the peer module (peer35's carry), and under tree/ the test files.
set -eu
C=$1
D=tools/hstu_dev
rm -rf $C/whl $C/tree $C/peer
mkdir -p $C/tree/tests/hstu $C/peer
[ -n "${2:-}" ] && mkdir -p $C/whl && cp $2 $C/whl/
cp $D/bwdfa39_run/{run*.sh,setup.sh,t39.py,ncu_digest.py} $D/carry_setup.sh $C/
cp /work/main/.carry/peer35/peer/hstu_attn_2_cuda*.so $C/peer/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernel_options.py} $C/tree/tests/hstu/
du -sh $C
