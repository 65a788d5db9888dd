#!/bin/bash
# Packs run K of hash34 into /work/main/.carry/hash34/ (the lead runs `OUT=... bash .carry/hash34/runK.sh` from main's
# tree root on the device): runK.sh, table29's common.sh (its carry folder renamed), eb_lab (evict_bench from this
# worktree, -lineinfo for ncu: insert-pass lab value 1 = main's scan under the dynamic schedule, 3 = the lean scan)
# and, with WHL=1, this branch's dynamicemb wheel, main's (from .carry/main34/whl, installed by setup.sh) and the test
# and benchmark files the GPU runs use under tree/.
# Usage: [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/hash34
R=$(cd "$H/../../.." && pwd)
rm -rf $D && mkdir -p $D && cp "$H/run$1.sh" "$H/setup.sh" $D/
sed 's#\.carry/table29#.carry/hash34#g; s#table29#hash34#g; s#\$C/eb_lab 24 18 1 ncu#$C/${NCU_BIN:-eb_lab} 24 18 1 ncu#; s#\$OUT/ncu.csv#$OUT/ncu${NCU_TAG:-}.csv#g' \
  "$H/../table29_run/common.sh" > $D/common.sh
NV="nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a"
(cd "$R" && nice -n 5 $NV -I. tools/dynamicemb_dev/evict_bench.cu -o $D/eb_lab 2>&1 | grep -i "error" || true)
# EB2=COMMIT: a second evict_bench (eb_lab2) from this branch's tree at COMMIT (e.g. the scan without the counter)
if [ -n "${EB2:-}" ]; then
  rm -rf /tmp/hash34_eb2 && git -C "$R" worktree add -f --detach /tmp/hash34_eb2 "$EB2" >/dev/null 2>&1
  (cd /tmp/hash34_eb2 && nice -n 5 $NV -I. tools/dynamicemb_dev/evict_bench.cu -o $D/eb_lab2 2>&1 | grep -i "error" || true)
  git -C "$R" worktree remove --force /tmp/hash34_eb2
fi
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $D/whl $D/tree/tests/dynamicemb $D/tree/tools/dynamicemb_dev $D/tree/benchmarks
  cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
  cp "$R"/tests/dynamicemb/*.py $D/tree/tests/dynamicemb/
  cp "$R"/tests/conftest.py $D/tree/tests/ 2>/dev/null || true
  cp "$R"/tools/dynamicemb_dev/{table_ab.py,upsert_lab_plugin.py} $D/tree/tools/dynamicemb_dev/
  cp "$R"/benchmarks/{hash_table.py,hkv_peer.py,bench_util.py} $D/tree/benchmarks/
fi
ls -la $D
du -sh $D
