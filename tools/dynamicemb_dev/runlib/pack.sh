#!/bin/bash
# Packs run K of a tools/dynamicemb_dev/*_run folder into /work/main/.carry/NAME/ (NAME: the folder's name without
# _run; the lead runs `OUT=... timeout 56 bash .carry/NAME/runK.sh` from main's tree root on the device): the folder's
# run*.sh and run.conf, this library's common.sh and setup.sh, and as run.conf and the environment ask:
#   LAB=evict_bench|assign_bench  that lab timer built with -lineinfo for sm_90a (eb_lab / ab_lab, carried gzipped;
#                                 common.sh unpacks them), from this worktree as it stands, or from commit LABC (git
#                                 archive of dynamicemb/ common/ benchmarks/ tools/dynamicemb_dev/) with PATCH (a file
#                                 of the run folder) applied; NOLAB=1 keeps the carry's binary (scripts changed only),
#                                 LABBIN=path carries that binary
#   WHL=1                         this tree's dynamicemb wheel (bazel-bin) for setup.sh's site "self"
#   TREE=1 (default with WHL=1)   under tree/: tests/dynamicemb/*.py, tests/conftest.py, the lab plugins and
#                                 table_ab.py, benchmarks/{hash_table,hkv_peer,bench_util}.py of this tree
#   pack_extra DIR (run.conf)     a function that copies the folder's own extra files into DIR
# Built in /tmp and moved into place at the end (the lead may copy the carry at any time: never leave it half
# written); the carry folder's size is printed and checked against 12 MB. CARRY_DIR (default /work/main/.carry)
# packs elsewhere (a dry run of the packing).
# Usage: [LAB=...] [LABC=commit] [PATCH=file] [NOLAB=1] [LABBIN=path] [WHL=1] [TREE=1] runlib/pack.sh RUN_DIR K
set -e
[ $# -eq 2 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
H=$(cd "$1" && pwd) K=$2
L=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$L/../../.." && pwd)
NAME=$(basename "$H" _run)
D=${CARRY_DIR:-/work/main/.carry}/$NAME
[ -f "$H/run$K.sh" ] || { echo "pack: no $H/run$K.sh" >&2; exit 2; }
pack_extra() { :; }
[ -f "$H/run.conf" ] && . "$H/run.conf"
N=/tmp/${NAME}_pack
rm -rf $N && mkdir -p $N
cp "$H"/run*.sh "$L/common.sh" "$L/setup.sh" $N/
[ -f "$H/run.conf" ] && cp "$H/run.conf" $N/
case "${LAB:-}" in
  evict_bench) bin=eb_lab ;;
  assign_bench) bin=ab_lab ;;
  ''|none) bin= ;;
  *) echo "pack: LAB=$LAB: evict_bench, assign_bench or none" >&2; exit 2 ;;
esac
if [ -n "$bin" ]; then
  if [ -n "${LABBIN:-}" ]; then
    cp "$LABBIN" $N/$bin
  elif [ "${NOLAB:-0}" = 1 ]; then
    gunzip -c $D/$bin.gz > $N/$bin && chmod +x $N/$bin
  else
    S=$R
    if [ -n "${LABC:-}" ]; then
      S=/tmp/${NAME}_src && rm -rf $S && mkdir -p $S
      git -C "$R" archive "$LABC" dynamicemb common benchmarks tools/dynamicemb_dev | tar -x -C $S
      [ -n "${PATCH:-}" ] && (cd $S && patch -p1 -s < "$H/$PATCH")
    fi
    (cd $S && nice -n 10 nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a -I. \
      tools/dynamicemb_dev/$LAB.cu -o $N/$bin 2>&1 | grep -i " error" || true)
  fi
  [ -x $N/$bin ] || { echo "pack: $bin not built" >&2; exit 1; }
  gzip -9 $N/$bin
fi
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $N/whl
  cp "$R"/bazel-bin/dynamicemb-*.whl $N/whl/
fi
if [ "${TREE:-${WHL:-0}}" = 1 ]; then
  mkdir -p $N/tree/tests/dynamicemb $N/tree/tools/dynamicemb_dev $N/tree/benchmarks
  cp "$R"/tests/dynamicemb/*.py $N/tree/tests/dynamicemb/
  cp "$R"/tests/conftest.py $N/tree/tests/
  cp "$R"/tools/dynamicemb_dev/{table_ab.py,upsert_lab_plugin.py} $N/tree/tools/dynamicemb_dev/
  cp "$R"/benchmarks/{hash_table.py,hkv_peer.py,bench_util.py} $N/tree/benchmarks/
fi
pack_extra $N
chmod +x $N/*.sh
rm -rf $D.new && cp -r $N $D.new && rm -rf $D && mv $D.new $D && rm -rf $N
ls -la $D
kb=$(du -sk $D | cut -f1)
echo "carry $D: $kb KB"
[ $kb -le 12288 ] || echo "pack: WARNING: over 12 MB (the helpers share 64 MiB)" >&2
