#!/bin/bash
# fp8f33 run 2 (issue 36, session 30; <= 50 s): D128's 192-key tiles without P's register copy: kernel_options(
# fp8_fwd_var=7) (kFp8FwdPingP, bit 128: the loop unrolled by two, P's registers alternating), 8 (that and run 1's
# var 4, the unmasked-tile test by the loop index), against the default and var 4; bitwise the default's output.
# Tests: test_fp8.py -k copy_and_tile_cuts (25: vars 2, 4-8 by kernel name, bitwise the default, the default against
# the fp64 emulation; five masks incl. target groups with the gap); then fp8_fwd_split.py in one process: burst
# (5 reps, L2 flushed) and sustained 1.5 s windows A B C D A B C D A (default, 4, 7, 8) at B16 S16K D128, causal
# H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f33/run2.sh` from the root of main's tree (carry: fp8f33_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 16 "copy_and_tile_cuts" tests/hstu/test_fp8.py
bench 50 --reps 5 --warmup-ms 25 --fwd-vars 4,7,8 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f33 run 2 done at $SECONDS s"
