#!/bin/bash
# Packs run K of table30 into /work/main/.carry/table30/ (the lead runs `OUT=... bash .carry/table30/runK.sh` from
# main's tree root on the device): runK.sh, table29's common.sh (its carry folder renamed), eb_lab (evict_bench from
# tree30.py's lab tree of this worktree, -lineinfo for ncu) and eb_cnt (the same with -DT30_COUNT).
# Usage: pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/table30
R=$(cd "$H/../../.." && pwd)
rm -rf $D && mkdir -p $D && cp "$H/run$1.sh" $D/
sed 's#\.carry/table29#.carry/table30#g; s#table29#table30#g' "$H/../table29_run/common.sh" > $D/common.sh
python3 "$H/tree30.py" "$R" /tmp/table30_lab
NV="nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a -I."
(cd /tmp/table30_lab && nice -n 5 $NV tools/dynamicemb_dev/evict_bench.cu -o $D/eb_lab 2>&1 | grep -i "error" || true)
(cd /tmp/table30_lab && nice -n 5 $NV -DT30_COUNT tools/dynamicemb_dev/evict_bench.cu -o $D/eb_cnt 2>&1 | grep -i "error" || true)
ls -la $D
