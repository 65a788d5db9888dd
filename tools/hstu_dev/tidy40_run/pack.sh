#!/bin/bash
# Fills .carry/tidy40 (runlib/pack.sh; run from anywhere): run1.sh, setup.sh, same40.py, the branch's wheel (WHEEL,
# default mkwheel.sh's: main40's wheel with the branch's _C.so) and under tree/ the test files.
#   bash tools/hstu_dev/tidy40_run/pack.sh [WHEEL]
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin tidy40
pack_add tools/hstu_dev/tidy40_run/{run1.sh,setup.sh,same40.py}
pack_wheel ${1:-/tmp/tidy40_obj/whl}
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py}
pack_end
