#!/bin/bash
# Fills the carry folder of fp8b27 (issue 36, session 24) from this worktree: the run scripts and their helpers
# (run 1 uses main's wheel only; run 2 adds the branch's hstu_attn lab wheel under whl/).
# Usage: bash pack.sh CARRY_DIR [WITH_WHEEL]
set -eu
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
mkdir -p $1
cp $H/run*.sh $H/clock_split.py $H/variant_split.py $H/smi_join.py $1/
if [ -n "${2:-}" ]; then
  mkdir -p $1/whl
  rm -f $1/whl/*.whl
  cp $R/bazel-bin/hstu_attn-*.whl $1/whl/
fi
du -sh $1
