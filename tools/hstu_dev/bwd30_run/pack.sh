#!/bin/bash
# Copies what bwd30's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd30_run/pack.sh /work/main/.carry/bwd30 [--no-wheel]
# (run 1 counts main's kernels: no branch wheel; later runs carry the branch's hstu_attn wheel and test files)
set -eu
C=$1
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
[ "${2:-}" = --no-wheel ] || cp bazel-bin/hstu_attn-*.whl $C/whl/
cp tools/hstu_dev/bwd30_run/{run*.sh,probe30.py} tools/hstu_dev/bwd17_run/prof17.py \
    tools/hstu_dev/bwd19_run/src_parts.py $C/
cp tools/hstu_dev/bwd15_run/setup.sh $C/setup15.sh
cp tools/hstu_dev/bwd15_run/ncu_digest.py tools/hstu_dev/bwd28_run/setup.sh tools/hstu_dev/bwd21_run/bwd21.py \
    tools/hstu_dev/bwd80_run/time80.py $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
du -sh $C
