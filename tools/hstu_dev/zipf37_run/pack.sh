#!/bin/bash
# Fills the carry folder /work/main/.carry/zipf37 from this worktree: the branch's hstu_attn wheel (mkwheel.sh's, in
# $WHL, default /tmp/zipf37_obj2/whl (run 1: W=/tmp/zipf37_obj); or bazel-bin's with BAZEL=1), the test files it changed (tree/), the bench scripts
# (fwd17_jag.py, fwd29_bench.py, zipf32_bench.py, zipf35_bench.py, zipf37_bench.py in jag/), the common carry setup,
# fwd28_run's setup as fwd28_setup.sh and this folder's scripts.
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/zipf37
rm -rf $C/whl $C/tree $C/jag $C/run*.sh
mkdir -p $C/whl $C/tree/tests/hstu $C/jag
if [ "${BAZEL:-0}" = 1 ]; then cp $W/bazel-bin/hstu_attn-*.whl $C/whl/; else cp ${WHL:-/tmp/zipf37_obj2/whl}/hstu_attn-*.whl $C/whl/; fi
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernel_options.py,test_kernels_gpu.py} \
  $C/tree/tests/hstu/
cp $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/fwd29_run/fwd29_bench.py \
  $W/tools/hstu_dev/zipf32_run/zipf32_bench.py $W/tools/hstu_dev/zipf35_run/zipf35_bench.py \
  $W/tools/hstu_dev/zipf37_run/zipf37_bench.py $C/jag/
cp $W/tools/hstu_dev/carry_setup.sh $C/
cp $W/tools/hstu_dev/fwd28_run/setup.sh $C/fwd28_setup.sh
cp $W/tools/hstu_dev/zipf37_run/{setup.sh,run*.sh} $C/
du -sh $C
