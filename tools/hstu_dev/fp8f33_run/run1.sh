#!/bin/bash
# fp8f33 run 1 (issue 36, session 30; <= 50 s): D128's 192-key tiles with per-tile cuts, kernel_options(fp8_fwd_var=
# N), bitwise the default's output: 4 the unmasked-tile test by the loop index (kFp8FwdIdxTest, bit 32), 5 the stage
# / phase advance in the turn window (kFp8FwdAdvTurn, bit 64), 6 both; one grid launcher for both tile widths.
# Tests: test_fp8.py -k "copy_and_tile_cuts or bounds_and_main_loop" (50: each variant's kernel by name, bitwise
# the default, the default against the fp64 emulation and main's loop; five masks incl. target groups with the gap);
# then fp8_fwd_split.py in one process: burst (5 reps, L2 flushed) and sustained 1.5 s
# windows A B C D A B C D A (default, 4, 5, 6) at B16 S16K D128, causal H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f33/run1.sh` from the root of main's tree (carry: fp8f33_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 18 "copy_and_tile_cuts or bounds_and_main_loop" tests/hstu/test_fp8.py
bench 50 --reps 5 --warmup-ms 25 --fwd-vars 4,5,6 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f33 run 1 done at $SECONDS s"
