#!/bin/bash
# bwd38's hstu wheel without a full Bazel build (runlib/mkwheel.sh; any sm80 header change rebuilds all 16 sm80 units
# in Bazel on the shared 2-core machine): the branch's bwd sm80 bf16 hdim128 / hdim256 units (UNITS) and hstu_ops.cc,
# linked with main38's other objects, main38's wheel with that _C.so and the branch's _ops.py in $W/whl (default
# W=/tmp/bwd38_obj). Only those units run the changed code: the op sets kBwdSm80DqClaim for bf16 D = 128 / 256 calls
# alone (the other units include the headers; their kernels and launchers never see the bit).
#   bash tools/hstu_dev/bwd38_run/mkwheel.sh [compile|link]   (from the worktree root; default both)
NAME=bwd38 BASE=main38 UNITS="ops ${UNITS:-hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_bf16_hdim256}" \
  exec bash "$(dirname "$0")/../runlib/mkwheel.sh" "${1:-all}"
