#!/bin/bash
# Fills the carry folder of fp8b27 (issue 36, session 24) from this worktree: the run scripts and their helpers
# (run 1 uses main's wheel only; later runs add the branch's hstu_attn wheel under whl/ and its test file under tree/).
# Usage: bash pack.sh CARRY_DIR [WITH_WHEEL]
set -eu
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
mkdir -p $1
cp $H/run*.sh $H/clock_split.py $H/variant_split.py $H/smi_join.py $1/
if [ -n "${2:-}" ]; then
  mkdir -p $1/whl $1/tree/tests/hstu
  rm -f $1/whl/*.whl
  cp $R/bazel-bin/hstu_attn-*.whl $1/whl/
  cp -r $R/tests/hstu/test_fp8_bwd.py $1/tree/tests/hstu/
fi
du -sh $1
