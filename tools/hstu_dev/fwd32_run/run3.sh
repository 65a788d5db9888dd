#!/bin/bash
# fwd32 (issue 39, session 29), run 3 (<= 48 s; run 2's wheel), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd32/run3.sh > <dir>/stdout.txt 2>&1
# Run 2 (the lead's call 3): the default 1.034x c1, 1.036x c3, 1.033x c5 at B16 S4K D256 (run 1: c1's kernel 1.046x
# c3), 1.008x / 1.034x / 1.012x at B256 S256; tests 10 + 14 passed. The branch's bf16 D = 256 default is FwdSm80PairsPf (hstu_fwd_xpf_kernel: the xadd pairs, Q early, fragments two
# MMA steps ahead); c1 = FwdSm80PairsXadd (without the fragments ahead), c3 = main's pairs (Q late), c5 = main's
# FwdSm80PairsEarly. Question: is the default not slower than main's kernels at the rows between (B64 S1K, B128
# S512), and what does ncu say of the fragments ahead (short scoreboard, tensor active)?
# 1. Time in one process: default, c1, c3, c5, FA2 at B16 S4K, B64 S1K, B128 S512, B256 S256 D256 (7 rounds).
# 2. Main's wheel in its own process: its default at B16 S4K and B256 S256 D256 (cross-process check).
# 3. ncu (pipes, warp states) of the default and c1 at B16 S4K D256.
BASE=main32 source "$(dirname "$0")/setup.sh"
J=$C/jag/fwd32_bench.py
echo "== 1. time ($SECONDS s)"
jag /tmp/site_fwd32 fwd32 17 --reps 7 --variants default c1 c3 c5 --fa2 --cases s4k256 b64s1k256 b128s512d256 b256
echo "== 2. main's wheel ($SECONDS s)"
jag /tmp/site_main main32 8 --reps 7 --variants default --cases s4k256 b256
echo "== 3. ncu ($SECONDS s)"
NCU_J=$J NCU_LIGHT=1 ncu_case fwd32n /tmp/site_fwd32 2 "hstu_fwd_(xpf|xadd)" --cases s4k256 --variants default c1
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (fwd32 = the branch's wheel: default = xadd pairs, Q early, fragments two steps ahead; c1 = xadd pairs,"
echo "#### Q early; c3 = main's pairs (Q late); c5 = main's pairs, Q early; main32 = main's wheel, own process;"
echo "#### sm90=False; alpha D^-1/2; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
echo "#### ncu B16 S4K D256 (default, c1)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd32n.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|tensor_cycles_active.avg.pct_of_peak_sustained_active|pipe_(alu|fma).*pct_of_peak_sustained_active|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch).*ratio|issue_active.avg.pct|inst_executed.sum " \
  $OUT/fwd32n_digest.md 2>/dev/null | cut -c1-200
