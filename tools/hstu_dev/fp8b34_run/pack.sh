#!/bin/bash
# Fills fp8b34's carry folder from this worktree (run from anywhere): fp8b29's pack (its setup.sh, the common carry
# setup, the lab helpers, this branch's hstu_attn wheel under whl/, the FP8 backward test files under tree/), then
# this folder's run scripts, path_ab.py and sanbad.py in place of fp8b29's run scripts, fp8p32's
# path_gaps.py beside them, and test_fp8.py under tree/.
# Usage: bash pack.sh [CARRY_DIR]  (default /work/main/.carry/fp8b34)
set -eu
H=$(cd "$(dirname "$0")" && pwd)
D=${1:-/work/main/.carry/fp8b34}
bash $H/../fp8b29_run/pack.sh $D > /dev/null
rm -f $D/run*.sh
cp $H/run*.sh $H/path_ab.py $H/sanbad.py $H/../fp8p32_run/path_gaps.py $D/
cp $H/../../../tests/hstu/test_fp8.py $D/tree/tests/hstu/
ls $D $D/whl
du -sh $D
