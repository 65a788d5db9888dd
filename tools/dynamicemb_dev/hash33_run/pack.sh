#!/bin/bash
# Packs run K of hash33 into /work/main/.carry/hash33/ (the lead runs `OUT=... bash .carry/hash33/runK.sh` from
# main's tree root on the device): runK.sh, table29's common.sh (its carry folder renamed), eb_lab (evict_bench from
# this worktree, -lineinfo for ncu; variant 3 = design C, 4 = C without its
# duplicate protocol) and, with WHL=1, this branch's dynamicemb wheel and the
# files the GPU runs use under tree/.
# The variants 3-5 (design C, the claim alone, the intent word) live in the kernel source of commit b80f720f only
# (removed from the branch's head: none paid): pack from a checkout of that commit.
# Usage: [WHL=1] [EB=prebuilt eb_lab] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/hash33
R=$(cd "$H/../../.." && pwd)
rm -rf $D && mkdir -p $D && cp "$H/run$1.sh" $D/
sed 's#\.carry/table29#.carry/hash33#g; s#table29#hash33#g' "$H/../table29_run/common.sh" > $D/common.sh
NV="nvcc -std=c++17 -O3 -DNDEBUG -DTABLE_LAB_LF_BARE -lineinfo -gencode=arch=compute_90a,code=sm_90a -I."
if [ -n "$EB" ]; then cp "$EB" $D/eb_lab  # (EB: an eb_lab already built from this tree with $NV)
else (cd "$R" && nice -n 5 $NV tools/dynamicemb_dev/evict_bench.cu -o $D/eb_lab 2>&1 | grep -i "error" || true); fi
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $D/whl $D/tree/tests/dynamicemb $D/tree/tools/dynamicemb_dev $D/tree/benchmarks
  cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
  cp "$R"/tests/dynamicemb/test_table_gpu.py $D/tree/tests/dynamicemb/
  cp "$R"/tools/dynamicemb_dev/{table_ab.py,upsert_lab_plugin.py,dedup_lab_plugin.py} $D/tree/tools/dynamicemb_dev/
  cp "$R"/benchmarks/{hash_table.py,hkv_peer.py} $D/tree/benchmarks/
fi
ls -la $D
du -sh $D
