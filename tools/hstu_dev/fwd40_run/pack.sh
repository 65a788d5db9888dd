#!/bin/bash
# Copies what fwd40's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/fwd40_run/pack.sh [DEST] [WHEEL]
# the branch's hstu_attn wheel (WHEEL; none: the scripts use main40's), the run scripts and setup with runlib's
# common.sh, carry_setup.sh and labtime.py, t40.py (the timer; fwd17_jag.py for its graph capture, bwdtime.py for its cases), dig40.py (the digest), and under tree/ the test files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin fwd40 "${1:-}"
pack_add tools/hstu_dev/fwd40_run/{run*.sh,setup.sh,t40.py,dig40.py} tools/hstu_dev/fwd17_run/fwd17_jag.py \
  tools/hstu_dev/runlib/bwdtime.py
if [ -n "${2:-}" ]; then pack_wheel "$2"; fi
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py}
pack_end
