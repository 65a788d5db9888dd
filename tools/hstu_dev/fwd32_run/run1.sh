#!/bin/bash
# fwd32 (issue 39, session 29), run 1 (<= 48 s), from the root of main's tree:
#   OUT=<dir> timeout 56 bash .carry/fwd32/run1.sh > <dir>/stdout.txt 2>&1
# The branch: the bf16 D = 256 default (no contexts, no split) is FwdSm80PairsXadd at every row count (the warp
# pairs, Q's copy early, ldmatrix addresses as L::xadd: hstu_fwd_xadd_kernel<..., true>); c1 = that kernel with its
# S / P V fragments loaded two MMA steps ahead (hstu_fwd_xpf_kernel); c3 = main's pairs (Q late: main's default from
# 5 query tiles), c5 = main's FwdSm80PairsEarly (main's default up to 4).
# 1. Tests (the branch's files in .carry/fwd32/tree): test_sm80_forward_pairs_xadd (the default and c1: error rule,
#    bitwise c3 and c5, kernel names), the D = 256 default / candidate kernel-name tests, the split's list bound.
# 2. Time in one process: default, c1, c3, c5, FA2 at B16 S4K D256 and B256 S256 D256.
BASE=main32 source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 19 "pairs_xadd or ((candidate_runs_its_kernel or long_rows_runs) and 256) or split_list_bound" -v $T
echo "== 2. time ($SECONDS s)"
t=$(( $(left) - 2 )); [ $t -gt 21 ] && t=21
[ $t -gt 2 ] && jag /tmp/site_fwd32 fwd32 $t --reps 5 --variants default c1 c3 c5 --fa2 --cases s4k256 b256
echo "== 1b. more GPU tests ($SECONDS s)"
[ $(left) -gt 6 ] && run_tests $(( $(left) - 1 )) "split_runs_its_kernel and 256" $T
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'pairs_xadd or ((candidate_runs_its_kernel or long_rows_runs) and"
echo "#### 256) or split_list_bound'; -v; then 'split_runs_its_kernel and 256')"
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[?.*/\1/' | sort | uniq -c
digest_tests
echo "#### time (fwd32 = the branch's wheel; sm90=False; alpha D^-1/2; default = xadd pairs, Q early; c1 = default +"
echo "#### fragments two steps ahead; c3 = main's pairs (Q late); c5 = main's pairs, Q early; FA2 = torch's flash SDPA)"
grep -E "^##|^\| |^\(|rror|Traceback|capture|^rc" $OUT/time.log | cut -c1-250
