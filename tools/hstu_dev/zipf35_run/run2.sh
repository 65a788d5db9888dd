#!/bin/bash
# zipf35 (issue 39, session 32), run 2 (<= 50 s), from the root of main's tree (main35 on the device):
#   OUT=<dir> timeout 56 bash .carry/zipf35/run2.sh > <dir>/stdout.txt 2>&1
# Run 1's wheel (no tests: run 1 passed them). Run 1 measured the self items slower than main's list kernel, so this
# run maps what the split's chunk is worth on the Zipf pair: main's path (fwd_sm80_split_main=True) under the rule
# against exact chunks of 3-16 KV tiles in the rule's tile (64 x 64 at D = 64 / 128), Zipf seed 0 and B2 S1820 at
# D = 64 / 128 / 256: which chunk gives each batch its best time, and the Zipf / dense ratio at the best of each.
source "$(dirname "$0")/setup.sh"
echo "== time ($SECONDS s)"
bench /tmp/site_zipf35 zipf35 $(( $(left) + 3 )) chunks --reps 5 --dims 64 128 256 --chunks 3 4 6 8 12 16
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### chunks: main's path (the list kernel) under the rule / with exact chunks nN of N KV tiles, rule's tile"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc " $OUT/time.log | grep -v "^(.*default / main" | cut -c1-250
