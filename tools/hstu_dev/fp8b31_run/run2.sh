#!/bin/bash
# fp8b31 run 2 (issue 36, session 28): amax_tree (kFp8BwdAmaxTree, option bit 60, diag 32768: the dS pass's amax of a
# thread's 32 values as four independent maxima instead of one dependent chain, the late part's 8 posted words by a
# tree; bit-equal). Its tests (test_fp8_bwd.py -k "amax_tree or refuses_a_variant": against the default bit-equal
# dk / dv, five masks x two modes, S16K with many groups; against the fp64 emulation on five masks), then burst /
# sustained at B16 S16K in one process beside nvidia-smi: default, amax_tree, default, amax_tree (1.5 s idle, 2.5 s).
# `OUT=DIR timeout 56 bash .carry/fp8b31/run2.sh` from the root of main's tree (carry: fp8b31_run/pack.sh).
NAME=fp8b31 BASE=main31
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
TREE=32768  # the op's diag: amax_tree
run_tests 21 "amax_tree or refuses_a_variant" tests/hstu/test_fp8_bwd.py
smi_on
split 48 0,$TREE,0,$TREE --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8_bwd.py [.sFE]*' $OUT/tests.log | tail -1)"
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
echo "fp8b31 run 2 done at $SECONDS s"
