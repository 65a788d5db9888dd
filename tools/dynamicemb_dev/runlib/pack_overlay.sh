#!/bin/bash
# Packs run K of a step-path run folder (step36_run, step38_run) into /work/main/.carry/NAME/ (NAME: the folder's name
# without _run; the lead runs `OUT=... bash .carry/NAME/runK.sh` from main's tree root on the device): runK.sh, the
# folder's setup.sh and *.py, this library's overlay_setup.sh, under tree/ the branch's tools named (TOOLS, files of
# tools/dynamicemb_dev), benchmarks/{embedding,embedding_step_profile,bench_util}.py and the test files changed since
# commit BASE_COMMIT, and with WHL=1 this tree's dynamicemb wheel (bazel-bin). Filled aside, then copied in at once
# (the lead may copy the folder at any time); CARRY_DIR (default /work/main/.carry) packs elsewhere.
# Usage: [WHL=1] TOOLS="steady_ab.py ..." pack_overlay.sh RUN_DIR K BASE_COMMIT
set -e
H=$(cd "$1" && pwd) K=$2 BC=$3
L=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$L/../../.." && pwd)
NAME=$(basename "$H" _run)
F=${CARRY_DIR:-/work/main/.carry}/$NAME
D=/tmp/${NAME}_pack
rm -rf $D && mkdir -p $D/tree/tools/dynamicemb_dev $D/tree/tests/dynamicemb $D/tree/benchmarks
cp "$H/run$K.sh" "$H/setup.sh" "$L/overlay_setup.sh" $D/
ls "$H"/*.py > /dev/null 2>&1 && cp "$H"/*.py $D/
for t in ${TOOLS:-}; do cp "$R/tools/dynamicemb_dev/$t" $D/tree/tools/dynamicemb_dev/; done
cp "$R"/benchmarks/{embedding.py,embedding_step_profile.py,bench_util.py} $D/tree/benchmarks/
for f in $(git -C "$R" diff --name-only $BC -- tests/dynamicemb); do cp "$R/$f" $D/tree/tests/dynamicemb/; done
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $D/whl && cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
fi
mkdir -p "$(dirname "$F")"
rm -rf $F && cp -r $D $F && rm -rf $D
ls -la $F $F/tree/tests/dynamicemb
du -sh $F
