#!/bin/bash
# Fills the carry folder /work/main/.carry/tidy36 from this worktree (run from anywhere): the run scripts, setup.sh with
# carry_setup.sh, bitcmp.py, the branch's hstu_attn wheel (bazel-bin) and under tree/ the test files the runs use
# (the branch's copies) with the headers test_kernel_options.py reads.
set -eu
D=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$D/../../.." && pwd) C=/work/main/.carry/tidy36
mkdir -p $C
rm -rf $C/whl $C/tree $C/*.sh $C/*.py
cp $D/{setup.sh,run*.sh,bitcmp.py,ratio.py} $W/tools/hstu_dev/carry_setup.sh $C/
mkdir -p $C/whl $C/tree/tests/hstu $C/tree/hstu/csrc/ops $C/tree/hstu/csrc/sm80 $C/tree/hstu/csrc/sm90
cp ${WHL:-$W/bazel-bin/hstu_attn-*.whl} $C/whl/  # (WHL: a saved copy of the sm90 wheel)
cp $W/tests/conftest.py $C/tree/tests/
for f in hstu_kernel_checks fp8_checks test_sm80_forward_gpu test_fp8 test_kernel_options test_kernels_gpu; do
  cp $W/tests/hstu/$f.py $C/tree/tests/hstu/
done
cp $W/hstu/csrc/ops/{hstu_plan.h,hstu_ops.cc} $C/tree/hstu/csrc/ops/
for f in hstu_fwd_sm80_kernel.cuh hstu_bwd_sm80_kernel.cuh hstu_fwd_sm80_split.h hstu_bwd_sm80_limits.h \
    hstu_bwd_sm80_pds_kernel.cuh; do
  cp $W/hstu/csrc/sm80/$f $C/tree/hstu/csrc/sm80/
done
cp $W/hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh $C/tree/hstu/csrc/sm90/
du -sh $C
