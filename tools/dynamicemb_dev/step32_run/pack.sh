#!/bin/bash
# Copies what step32's runs need into /work/main/.carry/step32/ (run from the step32 worktree after the build): this
# branch's dynamicemb wheel, the run scripts with hash28's setup (sourced with RUN=step32), the changed test file and
# the tools under tree/.
set -e
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.carry/step32
rm -rf $C && mkdir -p $C/whl $C/tree/tests/dynamicemb $C/tree/tools/dynamicemb_dev
cp $W/bazel-bin/dynamicemb-*.whl $C/whl/
cp $W/tools/dynamicemb_dev/step32_run/run*.sh $W/tools/dynamicemb_dev/hash28_run/setup.sh $C/
cp $W/tests/dynamicemb/test_embedding_gpu.py $C/tree/tests/dynamicemb/
cp $W/tools/dynamicemb_dev/{steady_ab.py,dedup_lab_plugin.py,lab_variants.py,pipelined_gaps.py} $C/tree/tools/dynamicemb_dev/
ls -la $C $C/whl
du -sh $C
