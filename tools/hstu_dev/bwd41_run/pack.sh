#!/bin/bash
# Copies what bwd41's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwd41_run/pack.sh [DEST] [WHEEL]
# the branch's wheel (default /tmp/bwd41_obj/whl) as xz (xzwheel.py: ~6 MB instead of 12.6; setup.sh unpacks it),
# the run scripts, t41.py with runlib's bwdtime.py, ncu_line.py, and under tree/ the test files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd41 "${1:-}"
pack_add tools/hstu_dev/bwd41_run/{run*.sh,setup.sh,t41.py,xzwheel.py,ncu_line.py} tools/hstu_dev/runlib/bwdtime.py
W=${2:-/tmp/bwd41_obj/whl}
[ -d "$W" ] && W=$(ls "$W"/hstu_attn-*.whl)
mkdir -p $PACK_DIR/whl
nice python3 $R/tools/hstu_dev/bwd41_run/xzwheel.py pack "$W" $PACK_DIR/whl/$(basename "$W").xz
md5sum "$W"
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernels_gpu.py}
pack_end
