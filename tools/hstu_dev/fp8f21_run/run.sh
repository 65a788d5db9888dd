#!/usr/bin/env bash
# fp8f21 run 1 (issue 36, FP8 forward, sustained under the 700 W cap; <= 40 s). Lab wheel of branch fp8f21 (product
# config + private lab variants of the D128 192-key kernel, kernel_options(fp8_fwd_var=...)): 1 / 2 / 3 the SiLU
# with 0 / 2 / 4 of every 8 P words in half2 (default 3); timing-only 4 (no K / Vt reload past the first stages: the
# energy of the L2 -> shared traffic) and 5 (the tanh form without its MUFU); 6 clusters of two CTAs (adjacent
# query tiles) sharing each K / Vt tile by TMA multicast (K / Vt from L2 once per 256 query rows); at D256 (64-key
# grid kernel) vars 4 and 6 too.
# 1. GPU tests (serial): var 6 first (a cluster variant: unless its 8 tests pass, the bench leaves it out), the
# default's emulation rule at D128 (tensor / head x 5 masks; block mode keeps the 128-key kernel, unchanged), vars
# 1-3 against the fp64 emulation, vars 4 / 5 run their kernels.
# 2. fp8_fwd_split.py --fwd-vars 1,...: burst (interleaved, L2 flushed) then each variant back to back for 0.4 s in
# turn (default first and last) at B16 S16K / S4K D128 and B16 S16K D256; nvidia-smi every 50 ms beside it
# (SM clock, power, throttle reasons; smi_digest.py: per window MHz, W, J per call, SM cycles per call).
# (3. an ncu step, removed: it failed on the device, see setup.sh.)
LIM=40
source .carry/fp8f21/setup.sh
T=tests/hstu/test_fp8.py
echo "== 1. tests ($SECONDS s)"
gpu_tests 14 $T::test_cuda_fp8_pair_variant_matches_emulating_reference $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_wide_silu_shares_match_emulating_reference $T::test_cuda_fp8_wide_timing_variants_run_their_kernels \
    -k "pair or shares or timing or (128 and not batch_head and not block)" --maxfail=30
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
VARS=1,2,3,4,5 NCUV=1
[ $(grep -c "test_cuda_fp8_pair_variant.*PASSED" $OUT/tests.log) = 8 ] && VARS=1,2,3,4,5,6 NCUV=6
echo "== 2. bench, vars $VARS ($SECONDS s)"
smi_log
bench $(( $(left) - 5 )) --reps 5 --warmup-ms 25 --fwd-vars $VARS --sustain 0.4 \
    --cases B16S16KD128,B16S4KD128,B16S16KD256
smi_stop
grep -E "^\(case|^\(sustain" $OUT/bench.log
echo "== end ($SECONDS s)"
