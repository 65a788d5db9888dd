#!/bin/bash
# zipf34 (issue 39, session 31), run 3 (<= 45 s; run 1's wheel), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/zipf34/run3.sh > <dir>/stdout.txt 2>&1
# Nowhere slower? default (the lean list) / plain in one process on the Zipf pair, the seed-1 draw (9,292 tokens) and
# its dense twin B2 S4646, and B4 S4K, B2 S4K, B8 S1K (ctx3) at D = 64 / 128 / 256; then main34's wheel (its
# default) on the same cases in its own process.
source "$(dirname "$0")/setup.sh"
echo "== time ($SECONDS s)"
bench /tmp/site_zipf34 zipf34 20 ratio --seed1 --edge --reps 5 --dims 64 128 256
bench ${BASE_SITE:-/tmp/site_main} main34 $(( $(left) + 4 )) ratio --base --seed1 --edge --reps 5 --dims 64 128 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_time
