#!/bin/bash
# Copies what bwdfa39's device runs need into the carry folder (runlib/pack.sh; run from anywhere):
#   bash tools/hstu_dev/bwdfa39_run/pack.sh /work/main/.carry/bwdfa39 [WHEEL]
# the branch's hstu_attn wheel (WHEEL; none: the scripts use main39's), the run scripts and setup with runlib's
# common.sh, carry_setup.sh and labtime.py, t39.py (the timer, with runlib/bwdtime.py), ncu_digest.py, the peer module
# (peer35's carry), and under tree/ the test files.
source "$(dirname "$0")/../runlib/pack.sh"
pack_begin bwdfa39 "$1"
pack_add tools/hstu_dev/bwdfa39_run/{run*.sh,setup.sh,t39.py,ncu_digest.py} tools/hstu_dev/runlib/bwdtime.py
if [ -n "${2:-}" ]; then pack_wheel "$2"; fi
pack_add -d peer /work/main/.carry/peer35/peer/hstu_attn_2_cuda*.so
pack_tree tests/conftest.py tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_gpu.py,test_kernel_options.py}
pack_end
