#!/bin/bash
# fp8d256's wheel: main43's objects + the branch's FP8 backward unit at D = 256 (a new unit, its line added to main's
# link after hdim128's), the pre-pass / finishing unit and hstu_ops.cc; the branch's _ops.py and _fp8_bwd.py.
# From the worktree root: bash tools/hstu_dev/fp8d256_run/mkwheel.sh [compile|link|params|all] (UNITS: the units).
NAME=fp8d256 BASE=${BASE:-main43} UNITS=${UNITS:-"hstu_bwd_sm90_fp8_hdim256 hstu_fp8_bwd_prepass ops"} \
  NEW=hstu_bwd_sm90_fp8_hdim256 PY=_fp8_bwd.py exec bash tools/hstu_dev/runlib/mkwheel.sh "$@"
