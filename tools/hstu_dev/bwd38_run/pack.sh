#!/bin/bash
# Copies what bwd38's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwd38_run/pack.sh /work/main/.carry/bwd38 [WHEEL]
# the branch's hstu_attn wheel (WHEEL, default mkwheel.sh's: main38's wheel with the branch's _C.so), the run scripts
# and setup with runlib's common.sh and carry_setup.sh, t38.py (the timer, with labtime.py and runlib/bwdtime.py), and
# under tree/ the test files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd38 "$1"
pack_add tools/hstu_dev/bwd38_run/{run*.sh,setup.sh,t38.py} tools/hstu_dev/runlib/bwdtime.py
pack_wheel ${2:-/tmp/bwd38_obj/whl/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py}
pack_end
