#!/usr/bin/env bash
# fp8f18 run 1 (issue 36, FP8 forward D128; <= 40 s): 1. GPU tests: the SiLU-mix variants kernel_options(fp8_fwd_var=
# 8 / 3 / 4 / 9: 2 / 3 / 5 / 6 of 8 P words in half2) on 128- and 192-key tiles against the fp64 emulation, the
# default's emulation rule at D128 (every mode and mask), the wide-tile length rule; 2. fp8_fwd_split.py: the default
# (192-key tiles from 8K keys, mix 4/8) against the variants in one process at S16K / S8K / S4K.
LIM=40
source .carry/fp8f18/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 18 $T::test_cuda_fp8_fwd_var_variants $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    $T::test_cuda_fp8_kernel_matches_emulating_reference -k "fwd_var or wide_tiles or (128 and not batch_head)"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
bench $(( $(left) - 1 )) --reps 5 --warmup-ms 30 --vars 8,3,4,9,7,sched --cases B16S16KD128,B16S8KD128,B16S4KD128
echo "== end ($SECONDS s)"
