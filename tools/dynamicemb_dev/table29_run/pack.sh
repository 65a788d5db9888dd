#!/bin/bash
# Packs run K of table29 into /work/main/.carry/table29/ (the lead runs `OUT=... bash .carry/table29/runK.sh` from
# main's tree root on the device): runK.sh and eb_lab, evict_bench built here from summary_tree.py's lab tree of this
# worktree (S = 0: the product's insert pass; mode lab 4: the victim-summary scan). -lineinfo for ncu.
# Usage: pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
D=/work/main/.carry/table29
K=$1
rm -rf $D && mkdir -p $D
cp "$H/run$K.sh" "$H/common.sh" $D/
python3 "$H/summary_tree.py" "$R" /tmp/table29_lab
(cd /tmp/table29_lab && nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a -I. \
  tools/dynamicemb_dev/evict_bench.cu -o $D/eb_lab)
ls -la $D
