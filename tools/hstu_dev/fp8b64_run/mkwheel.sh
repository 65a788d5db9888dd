#!/bin/bash
# fp8b64's wheel: main40's objects + the branch's FP8 backward units (hdim64: a new unit, its line added to main's
# link after hdim128's), the pre-pass / finishing unit and hstu_ops.cc; the branch's _ops.py and _fp8_bwd.py.
# From the worktree root: bash tools/hstu_dev/fp8b64_run/mkwheel.sh [compile|link|params|all] (UNITS: the units).
NAME=fp8b64 BASE=${BASE:-main40} \
  UNITS=${UNITS:-"hstu_bwd_sm90_fp8_hdim64 hstu_bwd_sm90_fp8_hdim128 hstu_fp8_bwd_prepass ops"} \
  NEW=hstu_bwd_sm90_fp8_hdim64 PY=_fp8_bwd.py exec bash tools/hstu_dev/runlib/mkwheel.sh "$@"
