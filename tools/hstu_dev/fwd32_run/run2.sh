#!/bin/bash
# fwd32 (issue 39, session 29), run 2 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd32/run2.sh > <dir>/stdout.txt 2>&1
# Run 1 (the lead's call 2): the xadd default 1.041x main's pairs (c3) at B16 S4K D256, 1.004x main's PairsEarly
# (c5) at B256 S256; c1 (fragments two MMA steps ahead) 1.004x / 1.010x faster than it, bit for bit. The branch now:
# the bf16 D = 256 default (no contexts, no split) is FwdSm80PairsPf (hstu_fwd_xpf_kernel: xadd pairs, Q early,
# fragments two steps ahead); c1 = FwdSm80PairsXadd (run 1's default, hstu_fwd_xadd_kernel<..., true>), c3 = main's
# pairs (Q late), c5 = main's FwdSm80PairsEarly.
# 1. Tests (the branch's files in .carry/fwd32/tree): test_sm80_forward_pairs_xadd (the default and c1: error rule,
#    bitwise c3 and c5, kernel names), the D = 256 kernel-name tests (candidates, long rows, split), the split's list
#    bound; then the D = 256 candidates' tests (every candidate against the default) in the time left.
# 2. Time in one process: default, c1, c3, c5, FA2 at B16 S4K D256 and B256 S256 D256 (median of 9 rounds).
BASE=main32 source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 24 "pairs_xadd or ((candidate_runs_its_kernel or long_rows_runs or split_runs_its_kernel) and 256) \
or split_list_bound" -v $T
echo "== 2. time ($SECONDS s)"
t=$(( $(left) - 2 )); [ $t -gt 11 ] && t=11
[ $t -gt 2 ] && jag /tmp/site_fwd32 fwd32 $t --reps 9 --variants default c1 c3 c5 --fa2 --cases s4k256 b256
echo "== 1b. more GPU tests ($SECONDS s)"
[ $(left) -gt 6 ] && run_tests $(( $(left) - 1 )) "candidates and 256" $T
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'pairs_xadd or ((candidate_runs_its_kernel or long_rows_runs or"
echo "#### split_runs_its_kernel) and 256) or split_list_bound'; -v; then 'candidates and 256')"
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (fwd32 = the branch's wheel; sm90=False; alpha D^-1/2; default = xadd pairs, Q early, fragments two"
echo "#### steps ahead; c1 = xadd pairs, Q early (run 1's default); c3 = main's pairs (Q late); c5 = main's pairs, Q"
echo "#### early; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
