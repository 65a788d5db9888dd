#!/bin/bash
# Packs run K of step36 into /work/main/.carry/step36/ (the lead runs `OUT=... bash .carry/step36/runK.sh` from main's
# tree root on the device): runK.sh, setup.sh, the branch's tools (steady_ab.py and what it imports) and changed test
# files under tree/, and with WHL=1 this tree's dynamicemb wheel (bazel-bin). Usage: [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) D=/work/main/.carry/step36
R=$(cd "$H/../../.." && pwd)
rm -rf $D && mkdir -p $D/tree/tools/dynamicemb_dev $D/tree/tests/dynamicemb $D/tree/benchmarks
cp "$H/run$1.sh" "$H/setup.sh" $D/
cp "$R"/tools/dynamicemb_dev/{steady_ab.py,lab_variants.py,pipelined_gaps.py} $D/tree/tools/dynamicemb_dev/
cp "$R"/benchmarks/{embedding.py,embedding_step_profile.py,bench_util.py} $D/tree/benchmarks/
for f in $(git -C "$R" diff --name-only 8af609e7 -- tests/dynamicemb); do cp "$R/$f" $D/tree/tests/dynamicemb/; done
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $D/whl && cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
fi
ls -la $D $D/tree/tests/dynamicemb
du -sh $D
