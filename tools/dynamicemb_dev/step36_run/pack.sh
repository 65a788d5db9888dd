#!/bin/bash
# Packs run K of step36 into /work/main/.carry/step36/ (runlib/pack_overlay.sh; the lead runs `OUT=... bash
# .carry/step36/runK.sh` from main's tree root on the device): runK.sh, setup.sh with overlay_setup.sh, the branch's
# tools (steady_ab.py and what it imports) and changed test files (since 8af609e7) under tree/, and with WHL=1 this
# tree's dynamicemb wheel (bazel-bin). Usage: [WHL=1] pack.sh K
TOOLS="steady_ab.py lab_variants.py pipelined_gaps.py" \
  exec bash "$(dirname "$0")/../runlib/pack_overlay.sh" "$(dirname "$0")" "$1" 8af609e7
