#!/usr/bin/env bash
# fp8f19 run 1 (issue 36, FP8 forward; <= 40 s). 1. GPU tests: the new private variants kernel_options(fp8_fwd_var=...)
# of the D128 192-key kernel (10-13: 7 / 8 / 10 / 11 of 24 P words in half2; 9: no pingpong; 14: S in two 96-key
# halves) and of D256 (6: 96-key tiles), var 8, against the fp64 emulation; the clock-stamp variant 15 (bitwise the
# default outside its CTA); the default's emulation rule at D128 (tensor / head / block x masks). 2. fp8_fwd_split.py:
# the default (main's kernels, SASS identical) against the variants in one process at S16K / S4K / S8K D128 and
# S16K D256, then the stamp traces (D128 192-key, D256 64-key kernels).
LIM=40
source .carry/fp8f19/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 17 $T::test_cuda_fp8_fwd_var_variants $T::test_cuda_fp8_fwd_trace_variant \
    $T::test_cuda_fp8_kernel_matches_emulating_reference -k "fwd_var or trace or (128 and not batch_head)"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
bench $(( $(left) - 1 )) --reps 5 --warmup-ms 25 --vars 14,9,10,11,12,13,8,6 --trace \
    --cases B16S16KD128,B16S16KD256,B16S4KD128,B16S8KD128
grep "^trace" $OUT/bench.log
echo "== end ($SECONDS s)"
