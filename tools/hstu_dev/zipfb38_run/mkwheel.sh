#!/bin/bash
# zipfb38's hstu wheel without a full Bazel build (runlib/mkwheel.sh; any sm80 header change rebuilds all 16 sm80
# units in Bazel on the shared 2-core machine): compiles the branch's bf16 bwd sm80 units named (default hdim64 / 128 /
# 256, the only ones whose code runs the split: launch_hstu_bwd_split is bf16 only) and hstu_ops.cc, links all three
# units' and the op's objects of $W (default /tmp/zipfb38_obj) with main38's other objects and writes main38's wheel
# with that _C.so and the branch's _ops.py into $W/whl.
#   bash tools/hstu_dev/zipfb38_run/mkwheel.sh [compile|link] [units...]   (from the worktree root)
ALL="hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_bf16_hdim64 hstu_bwd_sm80_bf16_hdim256"
MODE=${1:-all}
shift || true
NAME=zipfb38 BASE=main38 UNITS="ops ${*:-$ALL}" LINK_UNITS="ops $ALL" \
  exec bash "$(dirname "$0")/../runlib/mkwheel.sh" $MODE
