#!/bin/bash
# Copies what hash29's runs need into /work/main/.carry/hash29/ (run from the hash29 worktree after the build): this
# branch's dynamicemb wheel, the run scripts with hash28's setup (sourced with RUN=hash29), the changed test files and
# the tools under tree/.
set -e
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.carry/hash29
rm -rf $C && mkdir -p $C/whl $C/tree/tests/dynamicemb $C/tree/tools/dynamicemb_dev
cp $W/bazel-bin/dynamicemb-*.whl $C/whl/
cp $W/tools/dynamicemb_dev/hash29_run/run*.sh $W/tools/dynamicemb_dev/hash28_run/setup.sh $C/
cp $W/tests/dynamicemb/test_embedding_gpu.py $W/tests/dynamicemb/test_embedding_cpu.py $C/tree/tests/dynamicemb/
cp $W/tools/dynamicemb_dev/{steady_ab.py,dedup_lab_plugin.py,lab_variants.py,pipelined_gaps.py} $C/tree/tools/dynamicemb_dev/
ls -la $C $C/whl
du -sh $C
