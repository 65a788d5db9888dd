#!/bin/bash
# Copies what the step26 runs need into /work/main/.carry/step26/ (run from the step26 worktree after the build):
# this branch's dynamicemb wheel, the run scripts, and the changed test file and tools under tree/.
set -e
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.carry/step26
rm -rf $C && mkdir -p $C/whl $C/tree/tests/dynamicemb $C/tree/tools/dynamicemb_dev
cp $W/bazel-bin/dynamicemb-*.whl $C/whl/
cp $W/tools/dynamicemb_dev/step26_run/*.sh $C/
cp $W/tests/dynamicemb/test_embedding_gpu.py $C/tree/tests/dynamicemb/
cp $W/tools/dynamicemb_dev/{steady_ab.py,find_lab_plugin.py,lab_variants.py,pipelined_gaps.py,step_same.py} \
  $C/tree/tools/dynamicemb_dev/
ls -la $C $C/whl
du -sh $C
