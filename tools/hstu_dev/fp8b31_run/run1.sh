#!/bin/bash
# fp8b31 run 1 (issue 36, session 28): div_free (kFp8BwdDivFree, option bit 60, diag 32768: no IEEE division left in
# the consumers' loop, seven CALL.REL sites to the division's slow path gone; bit-equal) and the lab diag 33280
# (div_free + kFp8BwdDqMul2: dQ's partial packed to bf16, then scaled in bf16). Tests of div_free (test_fp8_bwd.py
# -k "div_free or refuses_a_variant": against the default bit-equal dk / dv, five masks x two modes, S16K with many
# groups; against the fp64 emulation on five masks), sancase.py (no sanitizer) on both diags, then burst / sustained
# at B16 S16K in one process beside nvidia-smi: default, div_free, div_free + dq_mul2, default (1.5 s idle, 2.5 s).
# `OUT=DIR timeout 56 bash .carry/fp8b31/run1.sh` from the root of main's tree (carry: fp8b31_run/pack.sh).
NAME=fp8b31 BASE=main31
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
DF=32768 DM=33280  # the op's diags: div_free, div_free + dq_mul2
run_tests 15 "div_free or refuses_a_variant" tests/hstu/test_fp8_bwd.py -v
PYTHONPATH=/tmp/site_$NAME timeout 9 python3 -P $C/sancase.py $DF $DM > $OUT/labcheck.log 2>&1
echo "labcheck rc $? ($SECONDS s)"
smi_on
split 48 0,$DF,$DM,0 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
digest_tests
echo "tests PASSED: $(grep -c PASSED $OUT/tests.log), FAILED: $(grep -c FAILED $OUT/tests.log)"
grep "diag\|sancase" $OUT/labcheck.log | cut -c1-200
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
echo "fp8b31 run 1 done at $SECONDS s"
