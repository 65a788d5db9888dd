#!/bin/bash
# Packs run K of hash35 into /work/main/.carry/hash35/ (the lead runs `OUT=... bash .carry/hash35/runK.sh` from main's
# tree root on the device): runK.sh, common.sh and evict_bench built with -lineinfo from this branch's tree at
# commit EB1 (eb_lab; default 67a4537f, the last commit holding the lab variants: the head has main's kernels).
# Lab values: 1 = main's insert pass (dynamic schedule); 3 = the eviction's lock CAS and victim exchange without
# acquire; 4 = 3 + the first pass's probe without acquires; 5 = insert_and_evict's victim row prefetched beside its
# exchange; 6 / 7 = the row copiers' first pass at 40 / 32 warps per SM; 8 / 9 = the insert pass's grid at 1 / 1.5
# blocks per SM. Runs as made: run 2 at 94a8e312, run 3 at 344e1ae7, run 4 at d635576a (run 1 never ran: it
# became run 2).
# Usage: [EB1=COMMIT] pack.sh K
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
build_eb "${EB1:-67a4537f}" $N/eb_lab
[ -x $N/eb_lab ] || { echo "pack: eb_lab not built" >&2; exit 1; }
mkdir -p $D && cp -r $N/* $D/ && rm -rf $N
ls -la $D
du -sh $D
