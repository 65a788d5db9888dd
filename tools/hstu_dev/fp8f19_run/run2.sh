#!/usr/bin/env bash
# fp8f19 run 2 (issue 36, FP8 forward; <= 40 s). Run 1's clock stamps: each consumer warpgroup spends ~270 cycles
# per KV tile in the next tile's two mbarrier waits at the loop top (data long there), on its critical path.
# 1. GPU tests: kernel_options(fp8_fwd_var=1) (the next tile's waits under the S wait: D128 192-key and D256 grid
# kernels, bitwise the default), 6 / 5 (D256 96-key tiles without / with those waits; error rule), the stamp
# variants 15 / 3, the wide-tile rule (rewritten without the removed vars 7 / 8), then the default's emulation rule
# at D128; 2. fp8_fwd_split.py: the default (main's kernels, SASS identical) against 1 / 6 / 5 in one process at
# S16K / S4K / S8K D128 and S16K D256, with the stamp traces of the default and of var 1.
LIM=40
source .carry/fp8f19/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 16 $T::test_cuda_fp8_fwd_var_variants $T::test_cuda_fp8_fwd_trace_variant \
    $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences $T::test_cuda_fp8_kernel_matches_emulating_reference \
    -k "fwd_var or trace or wide_tiles or (128 and not batch_head)"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
bench $(( $(left) - 1 )) --reps 5 --warmup-ms 25 --vars 1,6,5 --trace \
    --cases B16S16KD128,B16S16KD256,B16S4KD128,B16S8KD128
grep "^trace" $OUT/bench.log
echo "== end ($SECONDS s)"
