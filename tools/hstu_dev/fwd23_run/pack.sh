#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd23 from this worktree: fwd21's pack.sh (the branch's hstu_attn wheel,
# the test files, fwd21_bench.py), fwd21's setup.sh as fwd21_setup.sh, this folder's scripts and lab test, and the
# base wheel (fwd22's final, base/whl/: copied once from .carry/fwd22/whl).
set -eu
D=$(cd "$(dirname "$0")" && pwd) C=/work/main/.carry/fwd23
NAME=fwd23 bash "$D/../fwd21_run/pack.sh" > /dev/null
rm -f $C/run*.sh
mv $C/setup.sh $C/fwd21_setup.sh
cp "$D"/{setup.sh,run*.sh} $C/
cp "$D"/test_fwd23_lab.py $C/tree/tests/hstu/
mkdir -p $C/base/whl
ls $C/base/whl/hstu_attn-*.whl > /dev/null 2>&1 || cp /work/main/.carry/fwd22/whl/hstu_attn-*.whl $C/base/whl/
du -sh $C
