#!/bin/bash
# Copies what bwd36's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwd36_run/pack.sh /work/main/.carry/bwd36 [WHEEL]
# the branch's hstu_attn wheel (bazel-bin's, or WHEEL: main's wheel with the branch's _C.so, its changed kernel
# units compiled and linked with main's other objects by hand: mkwheel.sh), the run scripts and setup with runlib's
# common.sh and carry_setup.sh, t36.py (the timer, with labtime.py and runlib/bwdtime.py), and under tree/ the test
# files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd36 "$1"
pack_add tools/hstu_dev/bwd36_run/{run*.sh,setup.sh,t36.py} tools/hstu_dev/runlib/bwdtime.py
pack_wheel ${2:-$R/bazel-bin/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py}
pack_end
