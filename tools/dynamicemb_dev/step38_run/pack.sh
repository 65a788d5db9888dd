#!/bin/bash
# Packs run K of step38 into /work/main/.carry/step38/ (runlib/pack_overlay.sh; the lead runs `OUT=... bash
# .carry/step38/runK.sh` from main's tree root on the device): runK.sh, setup.sh with overlay_setup.sh, the run
# folder's scripts, the branch's tools and changed test files (since 6ca06103) under tree/, and with WHL=1 this tree's
# dynamicemb wheel (bazel-bin). Usage: [WHL=1] pack.sh K
TOOLS="steady_ab.py lab_variants.py pipelined_gaps.py step_ncu.py" \
  exec bash "$(dirname "$0")/../runlib/pack_overlay.sh" "$(dirname "$0")" "$1" 6ca06103
