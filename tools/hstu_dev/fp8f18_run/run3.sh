#!/usr/bin/env bash
# fp8f18 run 3 (issue 36, FP8 forward D128; <= 30 s), the branch's final code: the 192-key tiles (3 of 8 P words in
# half2) from 4,096 keys per sequence on average (run 2: bn192 0.970x the time at B16 S4K). 1. fp8_fwd_split.py: the
# default against kernel_options(fp8_fwd_var=7) (128-key tiles: main's S4K kernel) and 8 (192-key tiles with 4 of 8:
# main's wide kernel), bn192 at S2K, in one process; 2. GPU tests: the length rule first, then test_fp8.py's other
# GPU tests not run in run 2 (SiLU forms, diag variants, schedules, seqused, the emulation rule in tensor mode,
# graph capture), as many as the time allows.
LIM=30
source .carry/fp8f18/setup.sh
echo "== 1. bench ($SECONDS s)"
bench 11 --reps 5 --warmup-ms 30 --vars 7,8,bn192 --cases B16S4KD128,B16S2KD128,B16S16KD128
echo "== 2. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests $(( $(left) - 1 )) $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    $T::test_cuda_fp8_kernel_matches_emulating_reference $T::test_cuda_fp8_kernel_seqused_float16_out_and_gr_mask \
    $T::test_cuda_fp8_fwd_diag_variants_run_their_kernels $T::test_cuda_fp8_kernel_schedules_match \
    $T::test_cuda_graph_capture_of_fp8_call $T::test_cuda_fp8_silu_forms_match_emulating_reference \
    -k "not (matches_emulating_reference and not tensor)"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== end ($SECONDS s)"
