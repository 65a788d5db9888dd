#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd29 from this worktree: the hstu_attn wheel, the test files, the bench
# scripts (fwd17_jag.py's and fwd21_bench.py's helpers, fwd29_bench.py), the common carry setup, fwd28's setup as
# fwd28_setup.sh and this folder's scripts.
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/fwd29
mkdir -p $C/whl $C/tree/tests/hstu $C/jag
rm -f $C/whl/*.whl $C/run*.sh
cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
cp $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/fwd21_run/fwd21_bench.py \
  $W/tools/hstu_dev/fwd29_run/fwd29_bench.py $C/jag/
cp $W/tools/hstu_dev/carry_setup.sh $C/
cp $W/tools/hstu_dev/fwd28_run/setup.sh $C/fwd28_setup.sh
cp $W/tools/hstu_dev/fwd29_run/{setup.sh,run*.sh} $C/
du -sh $C
