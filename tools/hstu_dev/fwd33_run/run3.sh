#!/bin/bash
# fwd33 (issue 39, session 30), run 3 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd33/run3.sh > <dir>/stdout.txt 2>&1
# Run 2 (the lead's call 2): the tiles from a counter, bit for bit (6 passed), but 1.065x / 1.022x / 1.046x / 1.061x
# the default's time at B256 S256 / B128 S512 / B64 S1K / B16 S4K D256 (copies before the last P V, O from the
# registers: slower still, removed). Now thread 0 takes the next tile in the last KV step (run 2: at the tile's
# start, a whole tile ahead), and the tile's (b, m0, h) sit in shared memory. Question: does the persistent grid now
# beat the default at B256 S256 (predicted 0.97-1.00x) without being slower at the longer rows?
# 1. GPU tests: test_sm80_forward_persist_d256 (6 mask cases x 2 batches).
# 2. Time in one process: default, pers, FA2 at B256 S256, B128 S512, B64 S1K, B16 S4K D256 (7 rounds).
# 3. ncu (pipes, warp states) of the default and pers at B256 S256, one launch each.
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 20 "persist_d256" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
jag /tmp/site_fwd33 fwd33 12 --reps 7 --variants default pers --fa2 --cases b256 b128s512d256 b64s1k256 s4k256
echo "== 3. ncu ($SECONDS s)"
NCU_J=$J NCU_LIGHT=1 ncu_case fwd33n /tmp/site_fwd33 2 "hstu_fwd_(xpf|persist)" --cases b256 --variants default pers
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### time (fwd33 = the branch's wheel: default = main's kernel hstu_fwd_xpf_kernel; pers ="
echo "#### hstu_fwd_persist_kernel; sm90=False; alpha D^-1/2; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
echo "#### ncu B256 S256 D256 (default, pers)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd33n.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|tensor_cycles_active.avg.pct_of_peak_sustained_active|pipe_(alu|fma).*pct_of_peak_sustained_active|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch).*ratio|issue_active.avg.pct|inst_executed.sum " \
  $OUT/fwd33n_digest.md 2>/dev/null | cut -c1-200
