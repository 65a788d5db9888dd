#!/bin/bash
# Packs run K of hkv40 into /work/main/.carry/hkv40/ (runlib/pack.sh with run.conf): runK.sh, runlib's common.sh /
# setup.sh and evict_bench built with the first pass's lab variants compiled in (-DDYNAMICEMB_TABLE_FIRST_LAB=1,
# -lineinfo) from commit EBC (default 376c0c7e, run 1's variants q & 1 / 2 / 4 / 8; from the next commit on, 4 and 8
# are the default and the lab keeps 1 / 2; EBC=. builds from this worktree). NOEB=1 keeps the carry's binary.
# Usage: [NOEB=1] [EBC=commit|.] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
EBC=${EBC:-376c0c7e}
if [ "${NOEB:-0}" = 1 ]; then export NOLAB=1; else
  S=$R
  if [ "$EBC" != . ]; then
    S=/tmp/hkv40_src && rm -rf $S && mkdir -p $S
    git -C "$R" archive "$EBC" dynamicemb common benchmarks tools/dynamicemb_dev | tar -x -C $S
  fi
  (cd $S && nice -n 10 nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -DDYNAMICEMB_TABLE_FIRST_LAB=1 \
    -gencode=arch=compute_90a,code=sm_90a -I. tools/dynamicemb_dev/evict_bench.cu -o /tmp/hkv40_eb_lab)
  export LABBIN=/tmp/hkv40_eb_lab
fi
exec bash "$H/../runlib/pack.sh" "$H" "$@"
