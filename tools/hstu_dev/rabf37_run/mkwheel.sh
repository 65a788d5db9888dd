#!/bin/bash
# rabf37's hstu wheel without a full Bazel build (runlib/mkwheel.sh): the branch's fwd sm80 bf16 hdim64 / 128 / 256
# units (the dims named) and hstu_ops.cc (`ops`; its cfg word: hstu_fwd_sm80_split.h), linked with main37's other
# objects, main37's wheel with that _C.so and the branch's _ops.py in $W/whl (default /tmp/rabf37_obj). Only those
# units hold the branch's change that runs (the other units include the header too, but their kernels are main's).
#   bash tools/hstu_dev/rabf37_run/mkwheel.sh [64 128 256 ops]  (default: 64 ops; from the worktree root; NOLINK=1:
#   compile only)
U=
for d in ${*:-64 ops}; do if [ $d = ops ]; then U="$U ops"; else U="$U hstu_fwd_sm80_bf16_hdim$d"; fi; done
NAME=rabf37 BASE=main37 UNITS=$U exec bash "$(dirname "$0")/../runlib/mkwheel.sh" $([ "${NOLINK:-}" = 1 ] && echo compile || echo all)
