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
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py,test_kernel_options.py} \
    $C/tree/tests/hstu/
# (the sources test_kernel_options.py reads, under the tree's root)
mkdir -p $C/tree/hstu/csrc/ops $C/tree/hstu/csrc/sm80 $C/tree/hstu/csrc/sm90
cp hstu/_ops.py $C/tree/hstu/
cp hstu/csrc/ops/{hstu_plan.h,hstu_ops.cc} $C/tree/hstu/csrc/ops/
cp hstu/csrc/sm80/{hstu_fwd_sm80_kernel.cuh,hstu_bwd_sm80_kernel.cuh,hstu_bwd_sm80_limits.h} \
    hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh $C/tree/hstu/csrc/sm80/
cp hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh $C/tree/hstu/csrc/sm90/
du -sh $C
