#!/bin/bash
# Packs run K of hkv40 into /work/main/.carry/hkv40/ (runlib/pack.sh with run.conf): runK.sh, runlib's common.sh /
# setup.sh and evict_bench built here from this worktree with the first-pass lab variants compiled in
# (-DDYNAMICEMB_TABLE_FIRST_LAB=1, -lineinfo). NOEB=1 keeps the carry's binary (scripts changed only).
# Usage: [NOEB=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
if [ "${NOEB:-0}" = 1 ]; then export NOLAB=1; else
  (cd "$R" && nice -n 10 nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -DDYNAMICEMB_TABLE_FIRST_LAB=1 \
    -gencode=arch=compute_90a,code=sm_90a -I. tools/dynamicemb_dev/evict_bench.cu -o /tmp/hkv40_eb_lab)
  export LABBIN=/tmp/hkv40_eb_lab
fi
exec bash "$H/../runlib/pack.sh" "$H" "$@"
