#!/bin/bash
# Copies what bwd24's device runs need into the carry folder (runlib/pack.sh, with its common.sh and carry_setup.sh;
# run from anywhere):
#   bash tools/hstu_dev/bwd24_run/pack.sh /work/main/.carry/bwd24 [--no-wheel]
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd24 "$1"
[ "${2:-}" = --no-wheel ] || pack_wheel $R/bazel-bin
pack_add tools/hstu_dev/bwd24_run/{run*.sh,setup.sh,prof24.py}
pack_as tools/hstu_dev/bwd15_run/setup.sh setup15.sh
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
