#!/bin/bash
# Fills the carry folder /work/main/.carry/ctx26 from this worktree: the scripts, ctx26_bench.py with fwd17_jag.py
# (its timing), and with --wheel the branch's hstu_attn wheel and its test files (tree/).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
W=$(cd "$D/../../.." && pwd) C=/work/main/.carry/ctx26
mkdir -p $C
rm -rf $C/whl $C/tree
cp $D/{setup.sh,run*.sh,ctx26_bench.py} $W/tools/hstu_dev/fwd17_run/fwd17_jag.py $C/
if [ "${1:-}" = --wheel ]; then
  mkdir -p $C/whl $C/tree/tests/hstu
  cp $W/bazel-bin/hstu_attn-*.whl $C/whl/
  cp $W/tests/conftest.py $C/tree/tests/
  cp $W/tests/hstu/{hstu_kernel_checks.py,test_sm80_forward_gpu.py} $C/tree/tests/hstu/
fi
du -sh $C
