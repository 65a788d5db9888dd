#!/bin/bash
# Packs run K of hash26 into /work/main/.carry/hash26/ (the lead runs `OUT=... bash .carry/hash26/runK.sh` from
# main's tree root on the device): runK.sh and the evict_bench binary it names, built here from a source tree at the
# commit the run measured (-I TREE: the table headers of that tree; -lineinfo for ncu's source counters).
#   run 1: eb_main (df4a8c3) and eb_v1 (df4a8c3 with evict_insert inlined for flagged keys, notes "v1")
#   run 2: eb_h26 (50971b8: insert variants 0 / 1 / 2)      run 3: eb_v4 (325770d: insert variants 0 / 1 / 3 / 4)
# Usage: pack.sh K NAME TREE [NAME TREE ...]
set -e
R=$(cd "$(dirname "$0")/../../.." && pwd)
D=/work/main/.carry/hash26
K=$1; shift
rm -rf $D && mkdir -p $D
cp "$R/tools/dynamicemb_dev/hash26_run/run$K.sh" $D/
while [ $# -ge 2 ]; do
  nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a -I"$2" \
    "$2/tools/dynamicemb_dev/evict_bench.cu" -o $D/$1
  shift 2
done
ls -la $D
