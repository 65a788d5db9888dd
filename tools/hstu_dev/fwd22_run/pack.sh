#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd22 from this worktree: fwd21's pack.sh (the hstu_attn wheel, the test
# files, fwd21_bench.py), then fwd21's setup.sh as fwd21_setup.sh and this folder's scripts.
set -eu
D=$(cd "$(dirname "$0")" && pwd) C=/work/main/.carry/fwd22
NAME=fwd22 bash "$D/../fwd21_run/pack.sh" > /dev/null
cp "$D/../fwd21_run/setup.sh" $C/fwd21_setup.sh
cp "$D"/{setup.sh,run*.sh} $C/
du -sh $C
