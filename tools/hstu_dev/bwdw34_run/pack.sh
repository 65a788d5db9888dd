#!/bin/bash
# Copies what bwdw34's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwdw34_run/pack.sh /work/main/.carry/bwdw34
# bwd30's pack (the branch's hstu_attn wheel, bwd21.py / time80.py, the ncu helpers, bwd28's setup, the test files
# and the sources test_kernel_options.py reads, under tree/), then bwdw34's run scripts and racecase in place of
# bwd30's.
set -eu
C=$1
bash tools/hstu_dev/bwd30_run/pack.sh "$C" > /dev/null
rm -f "$C"/run*.sh "$C"/probe30.py
cp tools/hstu_dev/bwdw34_run/{run*.sh,racecase34.py} "$C"/
du -sh "$C"
