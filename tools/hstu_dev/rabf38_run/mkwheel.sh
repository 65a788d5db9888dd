#!/bin/bash
# rabf38's hstu wheel without a full Bazel build (runlib/mkwheel.sh): the branch's fwd sm80 bf16 hdim64 / 128 / 256
# units (the dims named) and hstu_ops.cc (`ops`; its cfg word: hstu_fwd_sm80_split.h), linked with main38's other
# objects, main38's wheel with that _C.so and the branch's _ops.py in $W/whl (default /tmp/rabf38_obj). Only those
# units hold the branch's change that runs (the other units include the header too, but their kernels are main's).
#   bash tools/hstu_dev/rabf38_run/mkwheel.sh [64 128 256 ops]  (default: 64 ops; from the worktree root; NOLINK=1:
#   compile only)
# KEEP_OPS=1: the last build's hstu_ops.cc object (where hstu_ops.cc and its headers did not change); KEEP_UNITS=1: a
# unit whose object is in $W already is not compiled again.
U=
for d in ${*:-64 ops}; do if [ $d = ops ]; then U="$U ops"; else U="$U hstu_fwd_sm80_bf16_hdim$d"; fi; done
KEEP=$([ "${KEEP_OPS:-}" = 1 ] && echo ops)$([ "${KEEP_UNITS:-}" = 1 ] && echo units)
[ "$KEEP" = opsunits ] && KEEP=1
KEEP=$KEEP NAME=rabf38 BASE=main38 UNITS=$U exec bash "$(dirname "$0")/../runlib/mkwheel.sh" $([ "${NOLINK:-}" = 1 ] && echo compile || echo all)
