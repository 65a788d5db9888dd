#!/usr/bin/env bash
# fp8f17 run 3 (issue 36, FP8 forward; <= 50 s), the branch's final code: 1. every GPU test of tests/hstu/test_fp8.py
# (the cuda tests; its CPU tests pass under Bazel) in seven parallel shards; 2. fp8_fwd_split.py, the default (D128:
# 192-key tiles from 8K keys per sequence) against kernel_options(fp8_fwd_var=7) (128-key tiles at any length: main's
# kernel) and var 5 in one process; 3. main's wheel, default only, in its own process.
LIM=50
source .carry/fp8f17/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
M=$T::test_cuda_fp8_kernel_matches_emulating_reference
gpu_tests_sharded 22 "$M -k 64" "$M -k 128" "$M -k 256" "$T::test_cuda_dequant_path_matches_its_emulating_reference" \
    "$T::test_cuda_fp8_kernel_seqused_float16_out_and_gr_mask $T::test_cuda_fp8_kernel_vs_dequantize_path_and_rab_fallback $T::test_cuda_bad_scale_recorded_without_sync $T::test_cuda_graph_capture_of_fp8_call $T::test_cuda_fp8_call_never_synchronizes $T::test_cuda_torch_compile_fullgraph_fp8_quant_mode" \
    "$T::test_cuda_fp8_kernel_bn192 $T::test_cuda_fp8_fwd_diag_variants_run_their_kernels $T::test_cuda_fp8_silu_forms_match_emulating_reference" \
    "$T::test_cuda_fp8_fwd_var_variants $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences $T::test_cuda_fp8_kernel_schedules_match"
echo "== 2. bench ($SECONDS s)"
bench 11 --reps 5 --warmup-ms 30 --vars 7,5 --cases B16S16KD128,B16S8KD128,B16S4KD128,B16S16KD256,B16S4KD256
echo "== 3. main's wheel ($SECONDS s)"
bench_main $(( $(left) - 1 )) --reps 5 --warmup-ms 30 --cases B16S16KD128,B16S16KD256
echo "== end ($SECONDS s)"
