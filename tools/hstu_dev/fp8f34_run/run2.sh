#!/bin/bash
# fp8f34 run 2 (issue 36, session 31; <= 52 s): the flipped wheel: every FP8 forward kernel forms its wgmma
# descriptors as the tile's low word plus a constant per k step (kDescAdd; executed per steady unmasked tile and warp:
# D128 192-key 569 -> 542, D128 128-key 439 -> 417, D256 64-key 265 -> 237, D64 426 -> 410); kernel_options(
# fp8_fwd_var=7) = main 39ee30ed's grid kernels (kFp8FwdMainDesc, bit 64). Run 1's vars 4 / 5 / 6 (SiLU splits) lost
# and stay untimed. Tests: test_fp8.py -k copy_and_tile_cuts (25: the default against the fp64 emulation; bitwise
# vars 2, 7 and, on the 192-key tiles, 3, by kernel name; five masks, D 64 / 128 / 256); then fp8_fwd_split.py:
# burst and sustained 1.5 s windows A B A B A (default / var 7) at B16 S16K D128 and D256, causal H4, per-tensor,
# beside nvidia-smi.
# `OUT=DIR timeout 56 bash .carry/fp8f34/run2.sh` from the root of main's tree (carry: fp8f34_run/pack.sh).
source "$(dirname "${BASH_SOURCE[0]}")"/setup.sh
run_tests 15 "copy_and_tile_cuts" tests/hstu/test_fp8.py
bench 52 --reps 5 --warmup-ms 25 --fwd-vars 7 --sustain 1.5 --sustain-rounds 2 --cases B16S16KD128,B16S16KD256
digest
grep -E "^[.FEsx]+ *\[" $OUT/tests.log | tail -3  # (pytest's progress lines: the count if the summary is cut)
echo "fp8f34 run 2 done at $SECONDS s"
