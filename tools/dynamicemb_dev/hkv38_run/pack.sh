#!/bin/bash
# Packs run K of hkv38 into /work/main/.carry/hkv38/ (runlib/pack.sh; run.conf adds the HKV binary and digest.py).
# Usage: [WHL=1] [TREE=1] pack.sh K
exec bash "$(dirname "$0")/../runlib/pack.sh" "$(dirname "$0")" "$@"
