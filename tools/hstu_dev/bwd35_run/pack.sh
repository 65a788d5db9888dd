#!/bin/bash
# Copies what bwd35's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwd35_run/pack.sh /work/main/.carry/bwd35 [--no-wheel]
# the branch's hstu_attn wheel (not with --no-wheel: main35's kernels only), the run scripts and setup with runlib's
# common.sh and carry_setup.sh, bwd21.py / time80.py (the timer), the ncu helpers, and under tree/ the test files (+
# the sources test_kernel_options.py reads).
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd35 "$1"
[ "${2:-}" = --no-wheel ] || pack_wheel $R/bazel-bin
pack_add tools/hstu_dev/bwd35_run/{run*.sh,setup.sh} tools/hstu_dev/bwd21_run/bwd21.py \
  tools/hstu_dev/bwd80_run/time80.py tools/hstu_dev/bwd15_run/ncu_digest.py tools/hstu_dev/bwd19_run/src_parts.py
pack_tree tests/conftest.py \
  tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py,test_kernel_options.py} \
  hstu/_ops.py hstu/csrc/ops/{hstu_plan.h,hstu_ops.cc} 'hstu/csrc/sm80/*.cuh' 'hstu/csrc/sm80/*.h' \
  hstu/csrc/sm90/hstu_fwd_fp8_sm90_kernel.cuh
pack_end
