#!/bin/bash
# Copies what bwd43's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwd43_run/pack.sh [DEST] [WHEEL]
# the branch's wheel (default /tmp/bwd43_obj/whl) as xz (xzwheel.py; setup.sh unpacks it), the run scripts, t43.py
# with runlib's bwdtime.py, and under tree/ the test files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwd43 "${1:-}"
pack_add tools/hstu_dev/bwd43_run/{run*.sh,setup.sh,t43.py,sass43.py} tools/hstu_dev/bwd41_run/xzwheel.py tools/hstu_dev/runlib/bwdtime.py
W=${2:-/tmp/bwd43_obj/whl}
[ -d "$W" ] && W=$(ls "$W"/hstu_attn-*.whl)
mkdir -p $PACK_DIR/whl
nice python3 $R/tools/hstu_dev/bwd41_run/xzwheel.py pack "$W" $PACK_DIR/whl/$(basename "$W").xz
md5sum "$W"
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py}
pack_end
