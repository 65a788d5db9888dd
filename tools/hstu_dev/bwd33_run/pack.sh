#!/bin/bash
# Copies what bwd33's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwd33_run/pack.sh /work/main/.carry/bwd33
# bwd30's pack (the branch's hstu_attn wheel, bwd21.py / time80.py, bwd28's setup, the test files and the sources
# test_kernel_options.py reads, under tree/), then bwd33's run scripts in place of bwd30's.
set -eu
C=$1
bash tools/hstu_dev/bwd30_run/pack.sh "$C" > /dev/null
rm -f "$C"/run*.sh "$C"/probe30.py
cp tools/hstu_dev/bwd33_run/run*.sh "$C"/
du -sh "$C"
