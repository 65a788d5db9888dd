#!/bin/bash
# Copies what bwd35's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd35_run/pack.sh /work/main/.carry/bwd35 [--no-wheel]
# the branch's hstu_attn wheel (not with --no-wheel: main35's kernels only), the run scripts and setup, carry_setup.sh,
# bwd21.py / time80.py (the timer), the ncu helpers, and under tree/ the test files (+ the sources
# test_kernel_options.py reads).
set -eu
C=$1
D=tools/hstu_dev
mkdir -p $C/whl $C/tree/tests/hstu
rm -f $C/whl/*.whl
[ "${2:-}" = --no-wheel ] || cp bazel-bin/hstu_attn-*.whl $C/whl/
cp $D/bwd35_run/{run*.sh,setup.sh} $D/carry_setup.sh $D/bwd21_run/bwd21.py $D/bwd80_run/time80.py \
    $D/bwd15_run/ncu_digest.py $D/bwd19_run/src_parts.py $C/
cp tests/conftest.py $C/tree/tests/
cp tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py,test_kernel_options.py} \
    $C/tree/tests/hstu/
mkdir -p $C/tree/hstu/csrc/ops $C/tree/hstu/csrc/sm80 $C/tree/hstu/csrc/sm90
cp hstu/_ops.py $C/tree/hstu/
cp hstu/csrc/ops/{hstu_plan.h,hstu_ops.cc} $C/tree/hstu/csrc/ops/
cp hstu/csrc/sm80/*.cuh hstu/csrc/sm80/*.h $C/tree/hstu/csrc/sm80/ 2>/dev/null || true
cp hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh $C/tree/hstu/csrc/sm90/
du -sh $C
