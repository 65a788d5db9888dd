#!/bin/bash
# Fills the carry folder /work/main/.carry/fwd24 from this worktree: fwd21's pack.sh (the hstu_attn wheel, the test
# files, fwd17_jag.py / fwd21_bench.py), fwd21's setup.sh as fwd21_setup.sh, fwd24_bench.py and this folder's scripts.
set -eu
# (fwd25's pack.sh: NAME=fwd25 RUNS=its folder: its scripts, this setup.sh as fwd24_setup.sh)
D=$(cd "$(dirname "$0")" && pwd) NAME=${NAME:-fwd24}
C=/work/main/.carry/$NAME RUNS=${RUNS:-$D}
NAME=$NAME bash "$D/../fwd21_run/pack.sh" > /dev/null
rm -f $C/run*.sh  # (fwd21's)
cp "$D/../fwd21_run/setup.sh" $C/fwd21_setup.sh
cp "$D/fwd24_bench.py" $C/jag/
cp "$D/setup.sh" $C/fwd24_setup.sh
cp "$RUNS"/{setup.sh,run*.sh} $C/
du -sh $C
