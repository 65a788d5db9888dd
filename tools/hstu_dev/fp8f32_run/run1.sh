#!/bin/bash
# fp8f32 run 1 (issue 36, session 29; <= 50 s): D128's 192-key tiles with per-tile cuts, kernel_options(fp8_fwd_var=
# N), bitwise the default's output: 2 P's register copy after the next S issue, 3 no output-rescale test, 5 the wgmma
# descriptors formed before the turn's sync, 6 the unmasked-tile test before it, 7 all four. Tests: test_fp8.py -k
# tile_cuts (10 cases: each variant's kernel by name, bitwise the default, all four against the fp64 emulation);
# then fp8_fwd_split.py in one process: burst (5 reps, L2 flushed) and sustained 1.5 s windows (default, 2, 3, 5, 6,
# 7, default) at B16 S16K D128, causal H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f32/run1.sh` from the root of main's tree (carry: fp8f32_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 14 "tile_cuts" tests/hstu/test_fp8.py
bench 49 --reps 5 --warmup-ms 25 --fwd-vars 2,3,5,6,7 --sustain 1.5 --sustain-rounds 1 --cases B16S16KD128
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f32 run 1 done at $SECONDS s"
