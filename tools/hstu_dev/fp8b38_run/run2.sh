#!/bin/bash
# fp8b38 run 2 (issue 36, session 35). Run 1: the default (kFp8BwdDqTma: dQ by bulk tensor reduce-adds into dq's
# bf16 rows, no finishing pass over dq) correct (30 tests) but 1.093x main's path interleaved, 1.027x back to back; its
# kernel +9.7 % (the finishing pass's 155 us gone). Hypothesis: dq's rows put one head's 256 bytes at a 1 KB stride, and
# the CTAs running together (a (batch, head) pair per group at S16K) all add into one head's columns, so each DRAM page
# of dq serves a quarter of its bytes (main's workspace: 4 KB per group and head). Labs (the op's diag): heads_grouped
# (kFp8BwdHeadsGrouped: the grid's groups hold a batch's 4 heads) and main_heads_grouped (main's kernel, grouped).
# (1) tests: the labs against the default (dk / dv bit-equal; 5 masks, S16K many groups), main_kernel against the
# emulation; (2) lab_ab.py at B16 S16K; (3) path_ab.py of the four. `OUT=DIR timeout 56 bash .carry/fp8b38/run2.sh`.
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
S=/tmp/site_$NAME
run_tests $(( 24 - SECONDS )) "lab_heads_grouped or (many_groups and heads_grouped) or (variant_matches_emulating and main_kernel)" tests/hstu/test_fp8_bwd.py
PYTHONPATH=$S timeout $(( 41 - SECONDS )) python3 -P $C/lab_ab.py --reps 20 --short 8 --rounds 2 > $OUT/lab_ab.log 2>&1
echo "lab_ab S16K rc $? ($SECONDS s)"
PYTHONPATH=$S timeout $(( 55 - SECONDS )) python3 -P $C/path_ab.py op main_kernel heads_grouped main_heads_grouped > $OUT/path_ab.log 2>&1
echo "path_ab rc $? ($SECONDS s)"
echo "#### digest: $GPU"
digest_tests
grep "^interleaved\|^short\|rror" $OUT/lab_ab.log | cut -c1-800
grep -v Warn $OUT/path_ab.log | grep -v "^  _warn" | sed "s/void hstu::(anonymous namespace)/k/g; s/hstu::(anonymous namespace)::hst/chk/; s/void hstu::sm90::hstu_bwd_fp8_sm/KERNEL/" | cut -c1-330 | tail -4
echo "fp8b38 run 2 done at $SECONDS s"
