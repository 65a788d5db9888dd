#!/bin/bash
# drab38's hstu wheel without a full Bazel build (runlib/mkwheel.sh; the shared 2-core machine: any sm80 header change
# rebuilds all 16 sm80 units there): the branch's bwd sm80 UNITS (default all 8; compiled again only when older than
# the pds / main backward kernel headers; the others linked from main's objects: the same code but run_hstu_bwd's
# single try of the rab loops, which only bf16 D = 64 / 128 / 256 take) and hstu_ops.cc, linked with main38's other
# objects, main38's wheel with that _C.so and the branch's _ops.py in $W/whl (default W=/tmp/drab38_obj).
#   [UNITS="hstu_bwd_sm80_bf16_hdim128 ..."] bash tools/hstu_dev/drab38_run/mkwheel.sh [compile|link]
ALL="hstu_bwd_sm80_bf16_hdim128 hstu_bwd_sm80_bf16_hdim64 hstu_bwd_sm80_bf16_hdim256 hstu_bwd_sm80_fp16_hdim128
     hstu_bwd_sm80_fp16_hdim64 hstu_bwd_sm80_fp16_hdim256 hstu_bwd_sm80_bf16_hdim32 hstu_bwd_sm80_fp16_hdim32"
NAME=drab38 BASE=main38 FRESH_AGAINST="hstu/csrc/sm80/hstu_bwd_sm80_pds_kernel.cuh hstu/csrc/sm80/hstu_bwd_sm80_kernel.cuh" \
UNITS="ops ${UNITS:-$ALL}" exec bash "$(dirname "$0")/../runlib/mkwheel.sh" "${1:-all}"
