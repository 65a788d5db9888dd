#!/usr/bin/env bash
# fp8f17 run 1 (issue 36, FP8 forward; ~55 s): 1. GPU tests of the branch's new variants (kernel_options(fp8_fwd_var=
# 1-5)) and a selection of the default's (emulation rule, tensor mode); 2. fp8_fwd_split.py, the variants interleaved
# in one process (D256: 4 stages, persistent CTAs, two P sets; D128: two P sets, the mix at 3/8 and 5/8 words,
# fp8_sched, bn192), then main's wheel default-only; 3. ncu of the D256 default / var 1 / 2 / 5 and the D128 default
# (B4 S8K).
source .carry/fp8f17/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 17 $T::test_cuda_fp8_fwd_var_variants $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_silu_forms_match_emulating_reference -k "fwd_var or (tensor and (128 or 256))"
echo "== 2. bench ($SECONDS s)"
bench 14 --reps 5 --warmup-ms 40 --vars 1,2,5,6,3,4,sched,bn192 --cases B16S16KD256,B16S16KD128,B16S8KD128,B16S4KD256,B16S4KD128
bench_main 7 --reps 5 --warmup-ms 40 --cases B16S16KD256,B16S16KD128
echo "== 3. ncu ($SECONDS s)"
ncu_profile d256 5 256:0 256:1 256:2 256:5 128:0
echo "== end ($SECONDS s)"
