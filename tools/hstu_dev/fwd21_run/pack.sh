#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd21 from this worktree: the hstu_attn wheel, the test files, the scripts.
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/${NAME:-fwd21}
mkdir -p $C/whl $C/tree/tests/hstu $C/jag
rm -f $C/whl/*.whl
cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
cp $W/tests/conftest.py $C/tree/tests/
cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py,test_kernels_gpu.py} $C/tree/tests/hstu/
cp $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/fwd21_run/fwd21_bench.py $C/jag/
cp $W/tools/hstu_dev/carry_setup.sh $W/tools/hstu_dev/bwd15_run/ncu_digest.py $C/
cp $W/tools/hstu_dev/fwd21_run/{setup.sh,run*.sh} $C/
du -sh $C
