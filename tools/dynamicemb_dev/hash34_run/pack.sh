#!/bin/bash
# Packs run K of hash34 into /work/main/.carry/hash34/ (the lead runs `OUT=... bash .carry/hash34/runK.sh` from main's
# tree root on the device): runK.sh, setup.sh, table29's common.sh (its carry folder renamed; NCU_BIN / NCU_TAG pick
# ncu_pass's binary and csv name) and evict_bench built with -lineinfo from this branch at commit EB1 (eb_lab) and,
# with EB2, at a second commit (eb_lab2). The lean scans live in the kernel source of these commits only (none paid,
# removed from the head): 343e1bfd the lean scan unrolled + the unaggregated group counter (run 1; 2420658d without
# the counter), 7e44ba4c A (the chunk loop not unrolled), 29454617 B (truncated ranks); lab value 3 selects them,
# 1 is main's scan under the same schedule. With WHL=1 also this tree's dynamicemb wheel (bazel-bin; main's is
# installed from .carry/main34/whl by setup.sh) and the test / benchmark files under tree/ (runs 2-3 as first
# written; not used in the end).
# Runs as made: run 1 `EB1=343e1bfd EB2=2420658d`, run 2 `EB1=29454617 EB2=7e44ba4c`; run 3 `EB2=7e44ba4c` (not run).
# Usage: [EB1=COMMIT] [EB2=COMMIT] [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/hash34
R=$(cd "$H/../../.." && pwd)
rm -rf $D && mkdir -p $D && cp "$H/run$1.sh" "$H/setup.sh" $D/
sed 's#\.carry/table29#.carry/hash34#g; s#table29#hash34#g; s#\$C/eb_lab 24 18 1 ncu#$C/${NCU_BIN:-eb_lab} 24 18 1 ncu#; s#\$OUT/ncu.csv#$OUT/ncu${NCU_TAG:-}.csv#g' \
  "$H/../table29_run/common.sh" > $D/common.sh
NV="nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a"
# build_eb COMMIT OUT: evict_bench from this branch's tree at COMMIT (a detached worktree, removed after)
build_eb() {
  rm -rf /tmp/hash34_eb && git -C "$R" worktree add -f --detach /tmp/hash34_eb "$1" >/dev/null 2>&1
  (cd /tmp/hash34_eb && nice -n 5 $NV -I. tools/dynamicemb_dev/evict_bench.cu -o "$2" 2>&1 | grep -i "error" || true)
  git -C "$R" worktree remove --force /tmp/hash34_eb
}
build_eb "${EB1:-29454617}" $D/eb_lab
[ -n "${EB2:-}" ] && build_eb "$EB2" $D/eb_lab2
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
