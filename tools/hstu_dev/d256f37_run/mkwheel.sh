#!/bin/bash
# d256f37's hstu wheel without a full Bazel build (runlib/mkwheel.sh; every sm80 unit lists every sm80 header, so a
# kernel-header change recompiles all 16 of them on the shared 2-core machine): the branch's
# hstu_fwd_sm80_bf16_hdim256 unit and its hstu_ops.cc (the cfg word of kernel_options(fwd_sm80_cfg=13 / 14)), linked
# with main37's other objects, main37's wheel with that _C.so and the branch's _ops.py in $W/whl (default
# /tmp/d256f37_obj2); then the xpf kernels' registers and spills. The other units include the changed headers too,
# but their kernels are main's (GRP = 0 folds away).
#   bash tools/hstu_dev/d256f37_run/mkwheel.sh   (from the worktree root)
set -eu
export W=${W:-/tmp/d256f37_obj2}
NAME=d256f37 BASE=main37 UNITS="ops hstu_fwd_sm80_bf16_hdim256" bash "$(dirname "$0")/../runlib/mkwheel.sh" all
[ "${DRY:-0}" = 1 ] || grep -A2 "xpfg_kernel\|19hstu_fwd_xpf_kernel" $W/ptxas_hstu_fwd_sm80_bf16_hdim256.txt |
  grep -E "registers|spill|Function" | head -12
