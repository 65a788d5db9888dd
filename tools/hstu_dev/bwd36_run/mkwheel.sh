#!/bin/bash
# bwd36's hstu wheel without a full Bazel build (runlib/mkwheel.sh; session 33: the shared 2-core machine's remote
# cache missed main's objects, a whole wheel took hours): the branch's bwd sm80 bf16 hdim64 / hdim128 units compiled
# for sm_90a, linked with main36's other objects by main's own link parameters (the same link reproduces main's _C.so
# bit for bit), main36's wheel with that _C.so and the branch's _ops.py in $W/whl (default /tmp/bwd36_obj). Only those
# two units include the branch's kernel change that runs (the other units include the header too, but their kernels
# are main's).
#   bash tools/hstu_dev/bwd36_run/mkwheel.sh   (from the worktree root)
NAME=bwd36 BASE=main36 UNITS="hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_bf16_hdim64" \
  exec bash "$(dirname "$0")/../runlib/mkwheel.sh" all
