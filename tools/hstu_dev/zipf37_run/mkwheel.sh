#!/bin/bash
# zipf37's hstu wheel without a full Bazel build (runlib/mkwheel.sh; bwd36's way, session 33): its change touches
# hstu_fwd_sm80_split.h, which every sm80 unit and the op include, so Bazel recompiles ~20 units on the shared 2-core
# machine. Compiles the branch's fwd sm80 bf16 units of the dims named (default 64 128 256) for sm_90a and hstu_ops.cc
# (OPS=0: not again), links all three units' and the op's objects of $W (default /tmp/zipf37_obj) with main37's other
# objects, and writes main37's wheel with that _C.so and the branch's _ops.py into $W/whl. Only those units hold code
# the branch changed that runs (the other units include the headers too, but their kernels and the cfg word's other
# values are main's).
#   bash tools/hstu_dev/zipf37_run/mkwheel.sh [64 128 256]   (from the worktree root; the units to recompile)
U=
for d in ${@:-64 128 256}; do U="$U hstu_fwd_sm80_bf16_hdim$d"; done
[ "${OPS:-1}" = 0 ] || U="ops$U"
NAME=zipf37 BASE=main37 UNITS=$U \
LINK_UNITS="ops hstu_fwd_sm80_bf16_hdim64 hstu_fwd_sm80_bf16_hdim128 hstu_fwd_sm80_bf16_hdim256" \
  exec bash "$(dirname "$0")/../runlib/mkwheel.sh" all
