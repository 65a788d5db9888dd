#!/bin/bash
# rab40's hstu wheel without a full Bazel build (runlib/mkwheel.sh): the branch's fwd sm80 bf16 hdim64 / 128 / 256
# units (the dims named) and hstu_ops.cc (`ops`; its cfg word: hstu_fwd_sm80_split.h), linked with main40's other
# objects, main40's wheel with that _C.so and the branch's _ops.py in $W/whl (default /tmp/rab40_obj).
#   bash tools/hstu_dev/rab40_run/mkwheel.sh [64 128 256 ops]  (default: all four; from the worktree root; NOLINK=1:
#   compile only; KEEP=1: the objects already in $W are not compiled again). Run 1's wheel: the D = 64 / 128 units
#   and ops (LINK_UNITS="ops hstu_fwd_sm80_bf16_hdim64 hstu_fwd_sm80_bf16_hdim128").
U=
for d in ${*:-64 128 256 ops}; do if [ $d = ops ]; then U="$U ops"; else U="$U hstu_fwd_sm80_bf16_hdim$d"; fi; done
LU="ops hstu_fwd_sm80_bf16_hdim64 hstu_fwd_sm80_bf16_hdim128 hstu_fwd_sm80_bf16_hdim256"
LINK_UNITS=${LINK_UNITS:-$LU} NAME=rab40 BASE=main40 UNITS=$U \
  exec bash "$(dirname "$0")/../runlib/mkwheel.sh" $([ "${NOLINK:-}" = 1 ] && echo compile || echo all)
