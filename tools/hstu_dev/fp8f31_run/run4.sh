#!/bin/bash
# fp8f31 run 4 (the lead's offer; issue 36, session 28; <= 50 s): kBounds in every grid kernel of the FP8 forward
# (also the 128-key tiles at D = 64 / 128: batches under 4K keys per sequence, block mode at D = 128);
# kernel_options(fp8_fwd_var=1) = main's loop in each. The whole GPU part of test_fp8.py (one pytest process; the
# default against main's loop bitwise at D 64 / 128 / 256, tensor / block, five masks), then fp8_fwd_split.py: burst
# and sustained 1.5 s windows A B A B A (default / var 1) at B16 S2K D128 (128-key tiles) and B16 S4K D64, causal H4,
# per-tensor, beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f31/run4.sh` from the root of main's tree (carry: fp8f31_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 22 "cuda" tests/hstu/test_fp8.py
bench 50 --reps 5 --warmup-ms 25 --fwd-vars 1 --sustain 1.5 --sustain-rounds 2 --cases B16S2KD128,B16S4KD64
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -4  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f31 run 4 done at $SECONDS s"
