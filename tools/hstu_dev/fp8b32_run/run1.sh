#!/bin/bash
# fp8b32 run 1 (issue 36, session 29): the late part's dQ issued before its amax barrier (kFp8BwdDqEarly, diag
# 2097152) and with it the dS8 stores and fence (kFp8BwdDs8Early, 4 dS8 buffers; both: diag 2097664, option bit 60
# ds8_early); bit-equal. Tests of ds8_early (test_fp8_bwd.py -k "ds8_early or refuses_a_variant": against the
# default bit-equal dk / dv, five masks x two modes, S16K with many groups; against the fp64 emulation on five masks;
# the refusals), sancase.py (no sanitizer) on both diags, then burst / sustained at B16 S16K in one process beside
# nvidia-smi: default, dq_early, ds8_early, default (1.5 s idle, 2.5 s windows).
# `OUT=DIR timeout 56 bash .carry/fp8b32/run1.sh` from the root of main's tree (carry: fp8b32_run/pack.sh; run 1 ran
# the lab wheel of 780f7f45: since the flip, diag 2097152 is main 4d2d71ae's kernel and 2097664 is not built).
NAME=fp8b32 BASE=main32
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
DQ=2097152 DS=2097664  # the op's diags: dq_early, dq_early + ds8_early
run_tests 17 "ds8_early or refuses_a_variant" tests/hstu/test_fp8_bwd.py
PYTHONPATH=/tmp/site_$NAME timeout 9 python3 -P $C/sancase.py $DQ $DS > $OUT/labcheck.log 2>&1
echo "labcheck rc $? ($SECONDS s)"
smi_on
split 48 0,$DQ,$DS,0 --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
digest_tests
echo "tests: $(grep -o '^tests/hstu/test_fp8_bwd.py [.sFE]*' $OUT/tests.log | tail -1)"
grep "diag\|sancase" $OUT/labcheck.log | cut -c1-200
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
echo "fp8b32 run 1 done at $SECONDS s"
