#!/bin/bash
# Packs run K of hash36 into /work/main/.carry/hash36/ with the shared run library (runlib/pack.sh: its options,
# e.g. NOLAB=1 keeps the carried lab binary, WHL=1 adds this tree's wheel and test files; run.conf holds this
# folder's defaults). Usage: [NOLAB=1] [LABC=commit] [PATCH=file] [WHL=1] pack.sh K
exec bash "$(dirname "$0")/../runlib/pack.sh" "$(dirname "$0")" "$@"
