#!/bin/bash
# bwd43's wheel: main's objects + the branch's two D = 64 backward units (the loop's headers changed only D = 64's
# 128-query tile kernels and their launcher). From the worktree root: bash tools/hstu_dev/bwd43_run/mkwheel.sh
# [all|compile|link]. Main's wheel: MAIN/.carry/$BASE/whl (default MAIN=/tmp/bwd43_main: main's bazel-out linked
# and main's Bazel wheel of 73795275 as .carry/main44/whl, made by this script when absent).
M=${MAIN:-/tmp/bwd43_main}
if [ ! -e $M/bazel-out ]; then
  mkdir -p $M/.carry/main44/whl
  ln -s "$(readlink -f /work/main/bazel-out)" $M/bazel-out
  cp "$(readlink -f /work/main/bazel-out)"/k8-opt/bin/hstu_attn-0.1.0-py3-none-manylinux_2_28_x86_64.whl \
    $M/.carry/main44/whl/
fi
MAIN=$M NAME=bwd43 BASE=main44 UNITS=${UNITS:-"hstu_bwd_sm80_bf16_hdim64 hstu_bwd_sm80_fp16_hdim64"} KEEP=${KEEP:-1} \
  exec bash tools/hstu_dev/runlib/mkwheel.sh "$@"
