#!/bin/bash
# fp8b30 run 2 (issue 36, session 27): lean2 (kFp8BwdLean | kFp8BwdLeanAmax, option bit 60 in this lab wheel, diag
# 8421376: lean + the dS pass's amax only where the packed e4m3 bytes reach 432 ug + the P pass's scale words kept
# while the q / dO factors stay). Its tests (test_fp8_bwd.py -k "lean or refuses_a_variant", as run 1's for lean),
# then burst / sustained at B16 S16K in one process beside nvidia-smi: default (main30's kernel), lean (run 1's
# kernel, diag 8388608), lean2, default (1.5 s idle, 2.5 s windows).
# `OUT=DIR timeout 56 bash .carry/fp8b30/run2.sh` from the root of main's tree (carry: fp8b30_run/pack.sh).
NAME=fp8b30 BASE=main30
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
LEAN=8388608 LEAN2=8421376  # the op's diags
run_tests 20 "lean or refuses_a_variant" tests/hstu/test_fp8_bwd.py -v
smi_on
split 48 0,$LEAN,$LEAN2,0 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
digest_tests
echo "tests PASSED: $(grep -c PASSED $OUT/tests.log), FAILED: $(grep -c FAILED $OUT/tests.log)"
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
echo "fp8b30 run 2 done at $SECONDS s"
