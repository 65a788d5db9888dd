#!/bin/bash
# Packs run K of hash35 into /work/main/.carry/hash35/ (the lead runs `OUT=... bash .carry/hash35/runK.sh` from main's
# tree root on the device): runK.sh, common.sh and evict_bench built with -lineinfo from this branch's tree at
# commit EB1 (default HEAD; eb_lab). Lab value 1 = main's insert pass (dynamic schedule), 3 = the lab variant of the
# commit (hash35: 3 the eviction's lock CAS and victim exchange without acquire, 4 = 3 + the first pass's probe
# without acquires, 5 insert_and_evict's victim row prefetched beside its exchange).
# With WHL=1 also this tree's dynamicemb wheel (bazel-bin), setup.sh and, under tree/, the test files and lab tools
# runK.sh uses (run 3).
# Usage: [EB1=COMMIT] [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/hash35
R=$(cd "$H/../../.." && pwd)
# Built in /tmp and copied into place at the end (the lead may copy the carry at any time: never leave it empty).
N=/tmp/hash35_pack
rm -rf $N && mkdir -p $N && cp "$H/run$1.sh" "$H/common.sh" $N/
NV="nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a"
build_eb() {  # build_eb COMMIT OUT: evict_bench from this branch's tree at COMMIT (a detached worktree, removed after)
  rm -rf /tmp/hash35_eb && git -C "$R" worktree add -f --detach /tmp/hash35_eb "$1" >/dev/null 2>&1
  (cd /tmp/hash35_eb && nice -n 5 $NV -I. tools/dynamicemb_dev/evict_bench.cu -o "$2" 2>&1 | grep -i " error" || true)
  git -C "$R" worktree remove --force /tmp/hash35_eb
}
build_eb "${EB1:-HEAD}" $N/eb_lab
[ -x $N/eb_lab ] || { echo "pack: eb_lab not built" >&2; exit 1; }
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $N/whl $N/tree/tests/dynamicemb $N/tree/tools/dynamicemb_dev $N/tree/benchmarks
  cp "$H/setup.sh" $N/
  cp "$R"/bazel-bin/dynamicemb-*.whl $N/whl/
  cp "$R"/tests/dynamicemb/*.py $N/tree/tests/dynamicemb/
  cp "$R"/tests/conftest.py $N/tree/tests/ 2>/dev/null || true
  cp "$R"/tools/dynamicemb_dev/{table_ab.py,upsert_lab_plugin.py} $N/tree/tools/dynamicemb_dev/
  cp "$R"/benchmarks/{hash_table.py,hkv_peer.py,bench_util.py} $N/tree/benchmarks/ 2>/dev/null || true
fi
mkdir -p $D && cp -r $N/* $D/ && rm -rf $N
ls -la $D
du -sh $D
