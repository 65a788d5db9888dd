#!/bin/bash
# Copies what step31's runs need into /work/main/.carry/step31/ (run from the step31 worktree after the build): this
# branch's dynamicemb wheel, the run scripts with hash28's setup (sourced with RUN=step31), the changed test file,
# the tools under tree/, and the byte-bound probe built here for sm_90 (bin/; nvcc -O3 -std=c++17 -arch=sm_90).
set -e
W=$(cd "$(dirname "$0")/../../.." && pwd)
C=/work/main/.carry/step31
rm -rf $C && mkdir -p $C/whl $C/bin $C/tree/tests/dynamicemb $C/tree/tools/dynamicemb_dev
cp $W/bazel-bin/dynamicemb-*.whl $C/whl/
cp $W/tools/dynamicemb_dev/step31_run/run*.sh $W/tools/dynamicemb_dev/hash28_run/setup.sh $C/
cp $W/tests/dynamicemb/test_embedding_gpu.py $C/tree/tests/dynamicemb/
cp $W/tools/dynamicemb_dev/{steady_ab.py,step_ncu.py,dedup_lab_plugin.py,lab_variants.py,pipelined_gaps.py} $C/tree/tools/dynamicemb_dev/
nice -n 5 nvcc -O3 -std=c++17 -arch=sm_90 -o $C/bin/step_bound_probe $W/tools/dynamicemb_dev/step_bound_probe.cu
ls -la $C $C/whl $C/bin
du -sh $C
