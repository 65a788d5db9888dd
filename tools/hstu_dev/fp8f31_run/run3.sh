#!/bin/bash
# fp8f31 run 3 (issue 36, session 28; <= 50 s): the flipped wheel (default = kBounds in the D128 192-key and D256
# 64-key grid kernels; kernel_options(fp8_fwd_var=1) = main's loop, SASS main's default kernels') timed against
# main's loop in one process: fp8_fwd_split.py burst (5 reps, L2 flushed) and sustained 1.8 s windows A B A B A
# (default / var 1) at B16 S4K D128 (its 192-key tiles), S16K D128 and S16K D256, causal H4, per-tensor, beside
# nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f31/run3.sh` from the root of main's tree (carry: fp8f31_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
bench 49 --reps 5 --warmup-ms 25 --fwd-vars 1 --sustain 1.8 --sustain-rounds 2 \
    --cases B16S4KD128,B16S16KD128,B16S16KD256
digest
echo "fp8f31 run 3 done at $SECONDS s"
