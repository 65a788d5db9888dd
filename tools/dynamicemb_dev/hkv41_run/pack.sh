#!/bin/bash
# Packs run K of hkv41 into /work/main/.carry/hkv41/ (runlib/pack.sh with run.conf): runK.sh, runlib's common.sh /
# setup.sh, evict_bench of this worktree with the first pass's lab variants (-DDYNAMICEMB_TABLE_FIRST_LAB=1,
# -lineinfo) and its line table (nvdisasm -gi; NVDIS = a folder with cuobjdump and nvdisasm), main's evict_bench, the
# branch's wheel (bazel-bin: build it first) and the test files. NOEB=1 keeps the carry's eb_lab.
# Usage: [NOEB=1] [NVDIS=dir] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
if [ "${NOEB:-0}" = 1 ]; then export NOLAB=1; else
  (cd "$R" && nice -n 10 nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -DDYNAMICEMB_TABLE_FIRST_LAB=1 \
    -gencode=arch=compute_90a,code=sm_90a -I. tools/dynamicemb_dev/evict_bench.cu -o /tmp/hkv41_eb_lab)
  export LABBIN=/tmp/hkv41_eb_lab
  if [ -n "${NVDIS:-}" ]; then
    d=/tmp/hkv41_gi && rm -rf $d && mkdir -p $d
    (cd $d && "$NVDIS/cuobjdump" -xelf all /tmp/hkv41_eb_lab > /dev/null && "$NVDIS/nvdisasm" -gi -c -sf *.cubin \
      > /tmp/hkv41_eb_lab_gi.sass)
    export GI=/tmp/hkv41_eb_lab_gi.sass
  fi
fi
export WHL=1 TREE=1
exec bash "$H/../runlib/pack.sh" "$H" "$@"
