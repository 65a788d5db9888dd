#!/bin/bash
# fp8f34 run 1 (issue 36, session 31; <= 50 s): D128's 192-key tiles with other SiLU splits, kernel_options(
# fp8_fwd_var=N): 4 8 of every 24 P words in half2, 5 10 of 24 (the default: 9 of 24 = 3 / 8), 6 the default's words
# with a degree-4 polynomial (one HFMA2 per pair less). Executed per steady unmasked tile and warp (SASS, nvcc 13.0):
# default 569, var 4 561 (4 MUFU more, 12 HFMA2 less), var 5 580, var 6 551.
# Tests: test_fp8.py -k silu_split_variants (20: each variant's kernel by name against the fp64 emulation; block mode
# bitwise the default); then fp8_fwd_split.py in one process: burst (5 reps, L2 flushed) and sustained 1.5 s
# windows A B C D A B C D A (default, 4, 5, 6) at B16 S16K D128, causal H4, per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f34/run1.sh` from the root of main's tree (carry: fp8f34_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 16 "silu_split_variants" tests/hstu/test_fp8.py
bench 51 --reps 5 --warmup-ms 25 --fwd-vars 4,5,6 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f34 run 1 done at $SECONDS s"
