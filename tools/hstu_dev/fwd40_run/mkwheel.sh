#!/bin/bash
# fwd40's wheel: main40's objects + the branch's fwd sm80 bf16 hdim128 unit and hstu_ops.cc (from the worktree root)
NAME=fwd40 BASE=main40 UNITS=${UNITS:-"ops hstu_fwd_sm80_bf16_hdim128"} \
  exec bash tools/hstu_dev/runlib/mkwheel.sh "$@"
