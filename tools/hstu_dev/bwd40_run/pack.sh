#!/bin/bash
# Copies what bwd40's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwd40_run/pack.sh [DEST] [WHEEL]
# the branch's wheel (default /tmp/bwd40_obj/whl), the run scripts, bwdfa39's t39.py (the timer) and ncu_digest.py,
# and under tree/ the test files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd40 "${1:-}"
pack_add tools/hstu_dev/bwd40_run/{run*.sh,setup.sh} tools/hstu_dev/bwdfa39_run/{t39.py,ncu_digest.py}
pack_wheel ${2:-/tmp/bwd40_obj/whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
