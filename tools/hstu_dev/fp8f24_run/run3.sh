#!/usr/bin/env bash
# fp8f24 run 3 (issue 36, FP8 forward; <= 25 s). Run 2's wheel (fp8f24 a46e38a: the wgmma descriptors from one low
# word per operand and stage in every FP8 forward kernel, the default; kernel_options(fp8_fwd_var=3) = main's
# per-k-step descriptors, its SASS main22's default kernel's). Run 2's sustained windows (default, var 3, default)
# drifted by 2-3 % from the first window to the last: here, after 0.6 s of the default untimed, the two alternate
# three times (A B A B A B A, 0.45 s windows) and each var-3 window is paired with the default windows around it.
# fp8_fwd_split.py (this branch's copy, with --sustain-rounds / --sustain-warm): B16 S16K D128, S16K D256, S4K D128.
LIM=25
source .carry/fp8f24/setup.sh
echo "== bench ($SECONDS s)"
bench_smi $(( $(left) - 1 )) --reps 5 --warmup-ms 25 --fwd-vars 3 --sustain 0.45 --sustain-rounds 3 \
    --sustain-warm 0.6 --cases B16S16KD128,B16S16KD256,B16S4KD128
echo "== end ($SECONDS s)"
