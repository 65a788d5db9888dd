#!/bin/bash
# Packs run K of hash27 into /work/main/.carry/hash27/ (the lead runs `OUT=... bash .carry/hash27/runK.sh` from
# main's tree root on the device): runK.sh, and for evict_bench runs the two binaries built here from this tree
# (-lineinfo for ncu): eb_h27 (the product's 4 lanes per key) and eb_t2 (tile2_tree.sh's lab copy: 2 lanes per
# key). Run 1's binaries came from 02a1331, where the schedule argument meant 0 dynamic / 1 static / 2 static +
# prefetch; from ed34175e on it means 0 the op's default / 1 dynamic / 2 static.
# Runs with a wheel: the dynamicemb wheel from bazel-bin, table_ab.py and upsert_lab_plugin.py.
# Usage: pack.sh K [eb] [whl]
set -e
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
D=/work/main/.carry/hash27
K=$1; shift
rm -rf $D && mkdir -p $D
cp "$H/run$K.sh" $D/
NV="nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a"
for w in "$@"; do
  if [ "$w" = eb ]; then
    $NV -I"$R" "$R/tools/dynamicemb_dev/evict_bench.cu" -o $D/eb_h27
    bash "$H/tile2_tree.sh" "$R" /tmp/hash27_tile2
    $NV -I/tmp/hash27_tile2 /tmp/hash27_tile2/tools/dynamicemb_dev/evict_bench.cu -o $D/eb_t2
  elif [ "$w" = whl ]; then
    mkdir -p $D/whl
    cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
    cp "$R/tools/dynamicemb_dev/table_ab.py" "$R/tools/dynamicemb_dev/upsert_lab_plugin.py" $D/
  fi
done
ls -la $D
# (run 2 also carries this branch's test_table_gpu.py and its helper under tree/)
if [ -f "$D/run2.sh" ] || grep -q "tree/" "$D/run$K.sh"; then
  mkdir -p $D/tree/tests/dynamicemb
  cp "$R/tests/dynamicemb/test_table_gpu.py" "$R/tests/dynamicemb/table_helpers.py" $D/tree/tests/dynamicemb/
  ls -la $D/tree/tests/dynamicemb
fi
