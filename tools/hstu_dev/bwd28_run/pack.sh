#!/bin/bash
# Copies what bwd28's device runs need into the carry folder (runlib/pack.sh, with its common.sh and carry_setup.sh;
# run from anywhere):
#   bash tools/hstu_dev/bwd28_run/pack.sh /work/main/.carry/bwd28
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd28 "$1"
pack_wheel $R/bazel-bin
pack_add tools/hstu_dev/bwd28_run/{run*.sh,setup.sh,count28.py} tools/hstu_dev/bwd27_run/count27.py \
  tools/hstu_dev/bwd21_run/bwd21.py tools/hstu_dev/bwd80_run/time80.py
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
