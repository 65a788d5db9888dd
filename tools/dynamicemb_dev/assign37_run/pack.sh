#!/bin/bash
# Packs run K of assign37 into /work/main/.carry/assign37/ (the lead runs `OUT=... timeout 56 bash .carry/assign37/runK.sh`
# from main's tree root on the device): runK.sh, common.sh, assign_bench built from this worktree as it stands (ab_lab,
# lab variants compiled in) and, with WHL=1, this tree's dynamicemb wheel (bazel-bin) with the test files and
# table_ab.py under tree/ (main's wheel comes from .carry/main37/whl on the device; setup.sh installs both).
# NOAB=1 keeps the carry's ab_lab. Usage: [NOAB=1] [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/assign37
R=$(cd "$H/../../.." && pwd)
N=/tmp/assign37_pack
rm -rf $N && mkdir -p $N && cp "$H"/run*.sh "$H/common.sh" "$H/setup.sh" $N/ 2>/dev/null || true
if [ "${NOAB:-0}" = 1 ]; then cp $D/ab_lab $N/; else (cd "$R" && nice -n 10 nvcc -std=c++17 -O3 -DNDEBUG -lineinfo \
  -gencode=arch=compute_90a,code=sm_90a -I. tools/dynamicemb_dev/assign_bench.cu -o $N/ab_lab 2>&1 | grep -i " error" || true); fi
[ -x $N/ab_lab ] || { echo "pack: ab_lab not built" >&2; exit 1; }
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $N/whl $N/tree/tests/dynamicemb $N/tree/tools/dynamicemb_dev $N/tree/benchmarks
  cp "$R"/bazel-bin/dynamicemb-*.whl $N/whl/
  cp "$R"/tests/dynamicemb/*.py $N/tree/tests/dynamicemb/
  cp "$R"/tests/conftest.py $N/tree/tests/
  cp "$R"/tools/dynamicemb_dev/{table_ab.py,upsert_lab_plugin.py} $N/tree/tools/dynamicemb_dev/
  cp "$R"/benchmarks/{hash_table.py,hkv_peer.py,bench_util.py} $N/tree/benchmarks/ 2>/dev/null || true
fi
rm -rf $D.new && cp -r $N $D.new && rm -rf $D && mv $D.new $D && rm -rf $N
ls -la $D
du -sh $D
