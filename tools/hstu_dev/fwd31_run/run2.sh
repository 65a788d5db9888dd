#!/bin/bash
# fwd31 part 2 (issue 39, session 28), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd31/run2.sh > <dir>/stdout.txt 2>&1
# The branch: fwd_sm80_cfg=1 / 5 at D = 256 run the warp pairs with their S and P V ldmatrix addresses as L::xadd
# (hstu_fwd_xadd_kernel; 5 with Q's copy early); the default is main's pairs (hstu_fwd_kernel / hstu_fwd_qearly_kernel).
# 1. Tests (the branch's files in .carry/fwd31/tree): test_sm80_forward_pairs_xadd (error rule, bitwise main's pairs,
#    kernel names), candidate_runs_its_kernel[256]; then the D = 256 candidates' tests in the time left.
# 2. Time: default (main's kernel), c1 (xadd), c5 (xadd, Q early), FA2 at B16 S4K D256 and B256 S256 D256.
# 3. ncu (pipes, warp states) of the default and c1 at B16 S4K D256 in the time left.
BASE=none source "$(dirname "$0")/setup.sh"  # (no main wheel: the default is main's kernel)
echo "== 1. GPU tests ($SECONDS s)"
run_tests 15 "pairs_xadd or (candidate_runs_its_kernel and 256)" -v $T
echo "== 2. time ($SECONDS s)"
bench /tmp/site_fwd31 fwd31 16 --reps 5 --variants default c1 c5 --fa2 --cases s4k256 b256
echo "== 1b. more GPU tests ($SECONDS s)"
[ $(left) -gt 14 ] && run_tests $(( $(left) - 10 )) "candidates and 256" $T
echo "== 3. ncu ($SECONDS s)"
NCU_J=$B NCU_LIGHT=1 ncu_case fwd31x /tmp/site_fwd31 2 "hstu_fwd_(kernel|xadd)" --cases s4k256 --variants default c1
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'pairs_xadd or (candidate_runs_its_kernel and 256)'; -v; then"
echo "#### 'candidates and 256')"
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (fwd31 = the branch's wheel; sm90=False; alpha D^-1/2; default = main's pairs; c1 = xadd pairs;"
echo "#### c5 = xadd pairs, Q early; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture" $OUT/time.log | cut -c1-250
echo "#### ncu B16 S4K D256 (default, c1)"
grep -E "^ncu:|rror|==PROF==|Traceback" $OUT/ncu_fwd31x.log 2>/dev/null | tail -6 | cut -c1-200
grep -E "gpu__time|tensor_cycles_active.avg.pct_of_peak_sustained_active|pipe_xu.avg.pct_of_peak_sustained_active|\
stalled_(wait|math|short|long|barrier|mio|not_sel|dispatch).*ratio|issue_active.avg.pct|inst_executed.sum " \
  $OUT/fwd31x_digest.md 2>/dev/null | cut -c1-200
