#!/usr/bin/env bash
# fp8f18 run 2 (issue 36, FP8 forward D128; <= 40 s), the candidate final code: the 192-key tiles' SiLU mix is
# 3 of 8 P words in half2 (run 1: 0.952x / 0.956x the time of 4 of 8 at S16K / S8K); 128-key tiles keep 4 of 8.
# 1. fp8_fwd_split.py: the default against kernel_options(fp8_fwd_var=8) (192-key tiles with 4 of 8: main's wide
# kernel), 7 (128-key tiles at any length: main's narrow kernel), fp8_sched and bn192 (192-key tiles at any
# length) in one process, S16K / S8K / S4K;
# 2. GPU tests of the changed paths (192-key tiles in every mode and mask against the fp64 emulation, the variant,
# the length rule); 3. ncu of the default and var 8 (B4 S8K) if time is left.
LIM=43
source .carry/fp8f18/setup.sh
echo "== 1. bench ($SECONDS s)"
bench 13 --reps 7 --warmup-ms 30 --vars 8,7,sched,bn192 --cases B16S16KD128,B16S8KD128,B16S4KD128
echo "== 2. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 17 $T::test_cuda_fp8_fwd_var_variants $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    $T::test_cuda_fp8_kernel_bn192
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 3. ncu ($SECONDS s)"
ncu_profile d128 2 128:0 128:8
echo "== end ($SECONDS s)"
