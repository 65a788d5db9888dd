#!/usr/bin/env bash
# fp8f24 run 1 (issue 36, FP8 forward; <= 40 s). Product-config wheel of fp8f24 (no dev define): the D128 192-key
# kernel with P's two register sets swapping roles (kernel_options(fp8_fwd_var=1): the KV loop unrolled by two, no
# 24-PRMT copy of P after each P V wait); var 2: that + the wgmma descriptors from one low word per operand and
# stage (fewer uniform ops per wgmma). Both bitwise the default's output; the default kernels are main's.
# 1. GPU tests, two pytest processes side by side, each under 14 s: vars 1 / 2 (4 cases each: their kernel, bitwise
#    the default, the fp64 rule) + kernel_options; the default's forward rule (D 128 / 256 x tensor / block x
#    causal / context_target_group) + the 192-key tile rule.
# 2. fp8_fwd_split.py: B16 S16K / S4K D128 default + the vars whose tests passed, B16 S16K D256 default (burst
#    interleaved, L2 flushed; then each sustained 0.6 s, default first and last); nvidia-smi every 50 ms.
LIM=40
source .carry/fp8f24/setup.sh
echo "== 1. tests ($SECONDS s)"
lab_test v1 14 $T::test_cuda_fp8_fwd_vars_p_swap_fast_desc tests/hstu/test_kernel_options.py &
K="wide_tiles or ((128 or 256) and (causal or context_target_group) and (tensor or block) and not local)"
lab_test d 14 $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences -k "$K" &
wait
for t in v1 d; do summary $t; done
V=
[ "$(grep -c 'fast_desc.*-1\] PASSED' $OUT/tests_v1.log)" = 4 ] && V=128:1
[ "$(grep -c 'fast_desc.*-2\] PASSED' $OUT/tests_v1.log)" = 4 ] && V=${V:+$V,}128:2
echo "== 2. bench, vars '${V}' ($SECONDS s)"
bench_smi $(( $(left) - 1 )) --reps 5 --warmup-ms 25 ${V:+--fwd-vars $V} --sustain 0.6 \
    --cases B16S16KD128,B16S4KD128,B16S16KD256
echo "== end ($SECONDS s)"
