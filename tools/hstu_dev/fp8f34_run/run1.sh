#!/bin/bash
# fp8f34 run 1 (issue 36, session 31; <= 52 s): D128's 192-key tiles, kernel_options(fp8_fwd_var=N): 4 8 of every 24
# P words in half2 (the default: 9 of 24 = 3 / 8), 5 10 of 24, 6 the default's words with a degree-4 polynomial (one
# HFMA2 per pair less), 7 the wgmma descriptors by one add per k step (bitwise the default). Executed per steady
# unmasked tile and warp (SASS, nvcc 13.0): default 569, var 4 561, var 5 580, var 6 551, var 7 542.
# Tests: test_fp8.py -k "silu_split_variants or (copy_and_tile_cuts and 192)" (30: vars 4-6 by kernel name against
# the fp64 emulation, block mode bitwise the default; vars 2 / 3 / 7 bitwise the default by kernel name, five masks);
# then fp8_fwd_split.py in one process: burst (5 reps, L2 flushed) and sustained 1.5 s windows A B C D A B C D A
# (default, 4, 6, 7) at B16 S16K D128, causal H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f34/run1.sh` from the root of main's tree (carry: fp8f34_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 18 "silu_split_variants or (copy_and_tile_cuts and 192)" tests/hstu/test_fp8.py
bench 52 --reps 5 --warmup-ms 25 --fwd-vars 4,6,7 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f34 run 1 done at $SECONDS s"
