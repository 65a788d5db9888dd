#!/bin/bash
# drab37's hstu wheel without a full Bazel build (runlib/mkwheel.sh; the shared 2-core machine: any sm80 header change
# rebuilds all 16 sm80 units there): the branch's 8 bwd sm80 units (compiled again only when older than the pds /
# main backward kernel headers) and hstu_ops.cc, linked with main37's other objects, main37's wheel with that _C.so and
# the branch's _ops.py in $W/whl (default W=/tmp/drab37_obj). The fwd units and the other ops do not include the
# changed headers' code that runs (hstu_plan.h's include of hstu_bwd_sm80_limits.h: constants only).
#   bash tools/hstu_dev/drab37_run/mkwheel.sh [compile|link]   (from the worktree root; default both)
NAME=drab37 BASE=main37 FRESH_AGAINST="hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh hstu/csrc/sm80/hstu_bwd_sm80_kernel.cuh" \
UNITS="ops hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_bf16_hdim64 hstu_bwd_sm80_bf16_hdim256 hstu_bwd_sm80_fp16_hdim128
       hstu_bwd_sm80_fp16_hdim64 hstu_bwd_sm80_fp16_hdim256 hstu_bwd_sm80_bf16_hdim32 hstu_bwd_sm80_fp16_hdim32" \
  exec bash "$(dirname "$0")/../runlib/mkwheel.sh" "${1:-all}"
