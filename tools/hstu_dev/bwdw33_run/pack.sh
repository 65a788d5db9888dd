#!/bin/bash
# Copies what bwdw33's device runs need into the carry folder (run from the worktree root):
#   bash tools/hstu_dev/bwdw33_run/pack.sh /work/main/.carry/bwdw33 [--main-wheel]
# bwd30's pack (the branch's hstu_attn wheel, bwd21.py / time80.py, the ncu helpers, bwd15's / bwd28's setups, the
# test files and the sources test_kernel_options.py reads, under tree/), then bwdw33's run scripts in place of bwd30's.
set -eu
C=$1
bash tools/hstu_dev/bwd30_run/pack.sh "$C" ${2:+--no-wheel} > /dev/null
rm -f "$C"/run*.sh "$C"/probe30.py
cp tools/hstu_dev/bwdw33_run/run*.sh "$C"/
if [ "${2:-}" = --main-wheel ]; then  # (run 1 without the branch's build: main's wheel)
  rm -f "$C"/whl/*.whl && cp /work/main/.carry/main33/whl/hstu_attn-*.whl "$C"/whl/ && touch "$C"/whl/MAIN
else
  rm -f "$C"/whl/MAIN
fi
du -sh "$C"
