#!/bin/bash
# Packs run K of step39 into /work/main/.carry/step39/ (the lead runs `OUT=... bash .carry/step39/runK.sh` from main's
# tree root on the device): runK.sh, setup.sh, the run folder's scripts, the branch's tools and changed test files
# under tree/, and with WHL=1 this tree's dynamicemb wheel (bazel-bin). Usage: [WHL=1] pack.sh K
set -e
H=$(cd "$(dirname "$0")" && pwd) F=/work/main/.carry/step39
R=$(cd "$H/../../.." && pwd)
D=/tmp/step39_pack  # filled aside, then copied in at once (the lead may copy the folder at any time)
rm -rf $D && mkdir -p $D/tree/tools/dynamicemb_dev $D/tree/tests/dynamicemb $D/tree/benchmarks
cp "$H/run$1.sh" "$H/setup.sh" "$H"/*.py $D/
cp "$R"/tools/dynamicemb_dev/{steady_ab.py,lab_variants.py,pipelined_gaps.py} $D/tree/tools/dynamicemb_dev/
cp "$R"/benchmarks/{embedding.py,embedding_step_profile.py,bench_util.py} $D/tree/benchmarks/
for f in $(git -C "$R" diff --name-only 9ce5c6b3 -- tests/dynamicemb); do [ -f "$R/$f" ] && cp "$R/$f" $D/tree/tests/dynamicemb/; done
if [ "${WHL:-0}" = 1 ]; then
  mkdir -p $D/whl && cp "$R"/bazel-bin/dynamicemb-*.whl $D/whl/
fi
rm -rf $F && cp -r $D $F
ls -la $F $F/tree/tests/dynamicemb
du -sh $F
