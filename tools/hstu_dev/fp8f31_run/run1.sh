#!/bin/bash
# fp8f31 run 1 (issue 36, session 28; <= 50 s): kernel_options(fp8_fwd_var=1) = kFp8VarBounds, the default FP8
# forward kernels (D128: 192-key tiles; D256: 64-key grid) with the unmasked-tile test by two bounds per warpgroup,
# pipeline stages / phases by increments, no block-mode branch on the 192-key tiles (bitwise the default's output).
# Tests: test_fp8.py -k "bounds or refuses_timing" (15 + 3 cases: kernel by name, fp64 emulation rule, bitwise the
# default; the product build still refuses the timing-only switches); then fp8_fwd_split.py in one process: burst
# (5 reps, L2 flushed) and sustained 1.8 s windows A B A B A (default / var 1) at B16 S16K D128 and D256, causal H4,
# per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f31/run1.sh` from the root of main's tree (carry: fp8f31_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 14 "bounds or refuses_timing" tests/hstu/test_fp8.py
bench 48 --reps 5 --warmup-ms 25 --fwd-vars 1 --sustain 1.8 --sustain-rounds 2 --cases B16S16KD128,B16S16KD256
digest
echo "fp8f31 run 1 done at $SECONDS s"
