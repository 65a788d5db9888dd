#!/bin/bash
# fp8f32 run 2 (issue 36, session 29; <= 50 s): the flipped wheel: the default grid kernels (D64 / D128 128-key,
# D128 192-key, D256) copy P into the P V's A registers right after the next turn's S issue (run 1's var 2);
# kernel_options(fp8_fwd_var=2) = the copy at the loop's tail (main's default kernels), 3 = the 192-key tiles without
# the output-rescale test. Tests: test_fp8.py -k "copy_and_rescale or bounds_and_main_loop" (25 + 25: each
# variant's kernel by name, bitwise the default, the default against the fp64 emulation and main's loop at D 64 /
# 128 / 256, tensor / head / block, five masks); then fp8_fwd_split.py: burst and sustained 1.5 s windows A B C A B
# C A (default / var 2 / var 3) at B16 S16K D128, causal H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f32/run2.sh` from the root of main's tree (carry: fp8f32_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 20 "copy_and_rescale or bounds_and_main_loop" tests/hstu/test_fp8.py
bench 49 --reps 5 --warmup-ms 25 --fwd-vars 2,3 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f32 run 2 done at $SECONDS s"
