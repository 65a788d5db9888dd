#!/bin/bash
# fwd31 part 2 (issue 39, session 28), run 3 (<= 48 s; run 2's wheel, 9bf9d8b2), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd31/run3.sh > <dir>/stdout.txt 2>&1
# Run 2: c1 (the xadd pairs, Q late) 0.997x main's pairs at B16 S4K D256, c5 (xadd, Q early) 1.021x. Question: is c5's
# gain Q's early copy (main's cfg 5 at S4K, notes: within +-0.8 %) or xadd in the early kernel? Main's wheel
# (default, c5 = main's PairsEarly at every row count) and the branch's (default = main's pairs, c1, c5), one process
# each, S4K first; then B256 S256; ncu of the branch's default and c5 at S4K in the time left.
BASE=main31 source "$(dirname "$0")/setup.sh"
echo "== 1. time ($SECONDS s)"
bench /tmp/site_main main31 11 --reps 7 --variants default c5 --cases s4k256
bench /tmp/site_fwd31 fwd31 11 --reps 7 --variants default c1 c5 --cases s4k256
bench /tmp/site_main main31b 8 --reps 7 --variants default c5 --cases s4k256
echo "== 2. ncu ($SECONDS s)"
NCU_J=$B NCU_LIGHT=1 ncu_case fwd31y /tmp/site_fwd31 2 "hstu_fwd_(qearly|xadd)" --cases s4k256 --variants c5
NCU_J=$B NCU_LIGHT=1 ncu_case fwd31m /tmp/site_main 2 "hstu_fwd_(qearly|xadd)" --cases s4k256 --variants c5
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (main31 = main's wheel: c5 = its PairsEarly at every row count; fwd31 = the branch's: default = main's"
echo "#### pairs, c1 = xadd pairs, c5 = xadd pairs with Q early; sm90=False; alpha D^-1/2)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
echo "#### ncu B16 S4K D256 c5: branch (xadd, Q early) | main (Q early)"
grep -E "^ncu:|rror|Traceback" $OUT/ncu_fwd31y.log $OUT/ncu_fwd31m.log 2>/dev/null | tail -6 | cut -c1-200
for t in fwd31y fwd31m; do
  grep -E "gpu__time|tensor_cycles_active.avg.pct_of_peak_sustained_active|\
stalled_(wait|math|short|long|barrier|mio).*ratio" $OUT/${t}_digest.md 2>/dev/null | cut -c1-200
done
