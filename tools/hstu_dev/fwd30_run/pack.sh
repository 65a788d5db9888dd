#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd30 from this worktree: the scripts (this folder's, the common carry
# setup, bwd15_run's ncu digest), the bench scripts (fwd17_jag.py, fwd21_bench.py, fwd30_bench.py); with --wheel also
# the branch's hstu_attn wheel and the test files it changed (tree/).
set -eu
W=$(cd "$(dirname "$0")/../../.." && pwd) C=/work/main/.carry/fwd30
mkdir -p $C/jag
rm -rf $C/whl $C/tree $C/run*.sh
cp $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $W/tools/hstu_dev/fwd21_run/fwd21_bench.py $C/jag/
[ -f $W/tools/hstu_dev/fwd30_run/fwd30_bench.py ] && cp $W/tools/hstu_dev/fwd30_run/fwd30_bench.py $C/jag/
cp $W/tools/hstu_dev/carry_setup.sh $W/tools/hstu_dev/bwd15_run/ncu_digest.py $C/
cp $W/tools/hstu_dev/fwd30_run/{setup.sh,run*.sh} $C/
if [ "${1:-}" = --wheel ]; then
  mkdir -p $C/whl $C/tree/tests/hstu
  cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
  cp $W/tests/conftest.py $C/tree/tests/
  cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py} $C/tree/tests/hstu/
fi
du -sh $C
