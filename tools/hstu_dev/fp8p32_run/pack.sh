#!/bin/bash
# Fills fp8p32's carry folder from this worktree (run from anywhere): fp8b32's pack (fp8b29's setup, the common carry
# setup, the lab helpers, this branch's hstu_attn wheel under whl/, the FP8 backward test files under tree/), then
# this folder's run scripts and path_gaps.py in place of fp8b32's run scripts, and fp8b32's carried wheel under
# base/whl (run 2's baseline).
# Usage: bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8p32)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
D=${1:-/work/main/.carry/fp8p32}
bash $H/../fp8b32_run/pack.sh $D > /dev/null
rm -f $D/run*.sh
cp $H/run*.sh $H/path_gaps.py $D/
mkdir -p $D/base/whl  # fp8b32's wheel (its final default), run 2's baseline
cp /work/main/.carry/fp8b32/whl/hstu_attn-*.whl $D/base/whl/
ls $D $D/whl
du -sh $D
