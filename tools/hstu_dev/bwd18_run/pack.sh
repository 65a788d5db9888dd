#!/bin/bash
# Copies what bwd18's device runs need into the carry folder (runlib/pack.sh, with its common.sh and carry_setup.sh;
# run from anywhere):
#   bash tools/hstu_dev/bwd18_run/pack.sh /work/main/.carry/bwd18
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd18 "$1"
pack_wheel $R/bazel-bin
pack_add tools/hstu_dev/bwd18_run/run*.sh tools/hstu_dev/bwd15_run/setup.sh
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
