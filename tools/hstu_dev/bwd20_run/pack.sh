#!/bin/bash
# Copies what bwd20's device runs need into the carry folder (runlib/pack.sh, with its common.sh and carry_setup.sh;
# run from anywhere):
#   bash tools/hstu_dev/bwd20_run/pack.sh /work/main/.carry/bwd20
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd20 "$1"
pack_wheel $R/bazel-bin
pack_add tools/hstu_dev/bwd20_run/run*.sh tools/hstu_dev/bwd17_run/prof17.py tools/hstu_dev/bwd19_run/src_parts.py \
  tools/hstu_dev/bwd15_run/{setup.sh,ncu_digest.py} tools/hstu_dev/bwd80_run/time80.py
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
