#!/bin/bash
# Fills fp8b32's carry folder from this worktree (run from anywhere): fp8b31's pack (fp8b29's setup, the common carry
# setup, fp8b27's variant_split.py / clock_split.py / smi_join.py, fp8b28's sancase.py, this branch's hstu_attn wheel
# under whl/, the FP8 backward test files under tree/), then this folder's run scripts in place of fp8b31's.
# Usage: bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8b32)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
D=${1:-/work/main/.carry/fp8b32}
bash $H/../fp8b31_run/pack.sh $D > /dev/null
rm -f $D/run*.sh
cp $H/run*.sh $D/
ls $D $D/whl
du -sh $D
