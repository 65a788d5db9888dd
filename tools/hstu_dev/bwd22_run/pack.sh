#!/bin/bash
# Copies what bwd22's device runs need into the carry folder (runlib/pack.sh, with its common.sh and carry_setup.sh;
# run from anywhere):
#   bash tools/hstu_dev/bwd22_run/pack.sh /work/main/.carry/bwd22
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd22 "$1"
pack_wheel $R/bazel-bin
pack_add tools/hstu_dev/bwd22_run/{run*.sh,setup.sh,memcheck_case.py}
pack_as tools/hstu_dev/bwd15_run/setup.sh setup15.sh
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
