#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd23 from this worktree: the branch's hstu_attn wheel (whl/), the base
# wheel (fwd22's final, base/whl/: copied once from .carry/fwd22/whl), the test files, fwd21_bench.py with
# fwd17_jag.py, ncu_digest.py, this folder's scripts.
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/fwd23
mkdir -p $C/whl $C/base/whl $C/tree/tests/hstu $C/jag
[ -f $C/base/whl/hstu_attn-*.whl ] 2>/dev/null || cp /work/main/.carry/fwd22/whl/hstu_attn-*.whl $C/base/whl/
rm -f $C/whl/*.whl
cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
cp $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/fwd21_run/fwd21_bench.py $C/jag/
cp $W/tools/hstu_dev/bwd15_run/ncu_digest.py $C/
cp $W/tools/hstu_dev/fwd23_run/{setup.sh,run*.sh} $C/
cp $W/tools/hstu_dev/fwd23_run/test_fwd23_lab.py $C/tree/tests/hstu/
du -sh $C
