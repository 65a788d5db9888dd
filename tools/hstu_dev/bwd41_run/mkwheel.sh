#!/bin/bash
# bwd41's wheel: main43's objects + the branch's two D = 128 backward units (the loop's headers changed only D = 128's
# three-stage kernels and launchers). From the worktree root: bash tools/hstu_dev/bwd41_run/mkwheel.sh [all|compile|link]
NAME=bwd41 BASE=main43 UNITS=${UNITS:-"hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_fp16_hdim128"} \
  exec bash tools/hstu_dev/runlib/mkwheel.sh "$@"
