#!/bin/bash
# Fills the carry folder /work/main/.carry/split39 from this worktree: the branch's hstu_attn wheel (mkwheel.sh's, in
# $WHL, default /tmp/split39_obj/whl; or bazel-bin's with BAZEL=1), the test files (tree/), the bench with
# fwd17_jag.py, the diag, the common carry setup and this folder's scripts.
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/split39
rm -rf $C/whl $C/tree $C/*.sh $C/*.py
mkdir -p $C/whl $C/tree/tests/hstu
if [ "${BAZEL:-0}" = 1 ]; then cp $W/bazel-bin/hstu_attn-*.whl $C/whl/; else cp ${WHL:-/tmp/split39_obj/whl}/hstu_attn-*.whl $C/whl/; fi
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_backward_split_gpu.py,test_sm80_backward_gpu.py} $C/tree/tests/hstu/
cp $W/tests/hstu/{test_sm80_forward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
cp $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/split39_run/{split39_bench.py,diag_many.py} $C/
cp $W/tools/hstu_dev/carry_setup.sh $C/
cp $W/tools/hstu_dev/split39_run/{setup.sh,run*.sh} $C/
du -sh $C
