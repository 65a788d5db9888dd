#!/bin/bash
# Packs run K of hash38 into /work/main/.carry/hash38/ (the lead runs `OUT=... timeout 56 bash .carry/hash38/runK.sh`
# from main's tree root on the device): runK.sh, common.sh, evict_bench built with -lineinfo from the lab commit EBC
# (default 67db0433, the variants' source: the head has main's kernels; eb_lab; lab values: 3 = main's insert pass
# (the wide scan), 4 = the bucket staged in shared memory by TMA bulk copies, 5 = 4 without the proxy fence, 6 =
# main's without the bucket's L2 prefetch, 7 = 5 with a suspend-hint wait; docs/dynamicemb_storage_notes.md, "A bulk
# copy of the bucket"; + 8 = the grid at 1 block per SM)
# and, with WHL=1, this tree's dynamicemb wheel (bazel-bin: build it at the lab commit for the variants) with the test
# files and lab plugins under tree/ (setup.sh installs it).
# NOEB=1 keeps the carry's eb_lab (scripts changed only); NOEB=2 carries no eb_lab (wheel runs); EBBIN=path carries
# that binary (built elsewhere, e.g. from a lab copy of the tree). eb_lab travels gzipped (common.sh unpacks it).
# Usage: [NOEB=1|2] [EBBIN=bin] [EBC=commit] [PATCH=file] [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/hash38
R=$(cd "$H/../../.." && pwd)
# Built in /tmp and copied into place at the end (the lead may copy the carry at any time: never leave it empty).
N=/tmp/hash38_pack
rm -rf $N && mkdir -p $N && cp "$H/run$1.sh" "$H"/run*.sh "$H/common.sh" "$H/setup.sh" $N/
if [ "${NOEB:-0}" = 2 ]; then :; elif [ -n "${EBBIN:-}" ]; then cp "$EBBIN" $N/eb_lab; elif [ "${NOEB:-0}" = 1 ]; then gunzip -c $D/eb_lab.gz > $N/eb_lab && chmod +x $N/eb_lab; else
  # evict_bench of the lab commit EBC (default 67db0433)
  S=/tmp/hash38_src && rm -rf $S && mkdir -p $S
  git -C "$R" archive "${EBC:-67db0433}" dynamicemb common benchmarks tools/dynamicemb_dev/evict_bench.cu | tar -x -C $S
  # PATCH=file: a lab patch on top
  [ -n "${PATCH:-}" ] && (cd $S && patch -p1 -s < "$H/$PATCH")
  (cd $S && nice -n 10 nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a -I. \
    tools/dynamicemb_dev/evict_bench.cu -o $N/eb_lab 2>&1 | grep -i " error" || true)
fi
[ "${NOEB:-0}" = 2 ] || [ -x $N/eb_lab ] || { echo "pack: eb_lab not built" >&2; exit 1; }
[ -f $N/eb_lab ] && gzip -9 $N/eb_lab
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
