#!/bin/bash
# Fills the carry folder of fp8b28 (issue 36, session 25) from this worktree: the run scripts, fp8b27's timing
# helpers (variant_split.py, clock_split.py, smi_join.py) and the branch's hstu_attn wheel under whl/.
# Usage: bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8b28)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
R=$(cd "$H/../../.." && pwd)
D=${1:-/work/main/.carry/fp8b28}
mkdir -p $D/whl
cp $H/run*.sh $H/sancase.py $D/
cp $R/tools/hstu_dev/fp8b27_run/{variant_split,clock_split,smi_join}.py $D/
rm -f $D/whl/*.whl
cp $R/bazel-bin/hstu_attn-*.whl $D/whl/
du -sh $D
