#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd25 from this worktree: fwd21's pack.sh (the hstu_attn wheel, the test
# files, fwd17_jag.py / fwd21_bench.py), fwd21's setup.sh as fwd21_setup.sh, fwd24's bench and this folder's scripts.
set -eu
D=$(cd "$(dirname "$0")" && pwd) C=/work/main/.carry/fwd25
NAME=fwd25 bash "$D/../fwd21_run/pack.sh" > /dev/null
rm -f $C/run*.sh  # (fwd21's)
cp "$D/../fwd21_run/setup.sh" $C/fwd21_setup.sh
cp "$D/../fwd24_run/fwd24_bench.py" $C/jag/
cp "$D"/{setup.sh,run*.sh} $C/
du -sh $C
