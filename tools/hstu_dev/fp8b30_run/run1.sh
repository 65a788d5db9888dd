#!/bin/bash
# fp8b30 run 1 (issue 36, session 27): lean (kFp8BwdLean, option bit 60: the full-tile test by three bounds per
# warpgroup, no IEEE division in the tile's dS / dQ factors, dQ's reduce-add address by increments; bit-equal dk / dv).
# Its tests (test_fp8_bwd.py -k "lean or refuses_a_variant": against the default kernel, dk / dv bit-equal, five
# masks x two modes, S16K with many groups; against the fp64 emulation on five masks), then burst / sustained at B16
# S16K against the default (main30's kernel, SASS identical) in one process: variant_split.py windows default, lean,
# default, lean (1.5 s idle, 2.5 s back to back the benchmark's way) beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8b30/run1.sh` from the root of main's tree (carry: fp8b30_run/pack.sh).
NAME=fp8b30 BASE=main30
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
LEAN=8388608  # kFp8BwdLean: the op's diag
run_tests 17 "lean or refuses_a_variant" tests/hstu/test_fp8_bwd.py
smi_on
split 47 0,$LEAN,0,$LEAN --idle 1.5 --window 2.5 --tail 1
smi_off
echo "#### digest: $GPU"
digest_tests
grep "^| \|^|---\|^####" $OUT/split.log
grep -v "^| \|^|---" $OUT/split.log | tail -2 | cut -c1-200
echo "fp8b30 run 1 done at $SECONDS s"
