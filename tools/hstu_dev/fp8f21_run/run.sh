#!/usr/bin/env bash
# fp8f21 run 1 (issue 36, FP8 forward, sustained under the 700 W cap; <= 40 s). Dev wheel of branch fp8f21: the D128
# 192-key kernel's private variants (kernel_options(fp8_fwd_var=...)): 1 / 2 / 3 the SiLU with 0 / 2 / 4 of every
# 8 P words in half2 (default 3), timing-only 4 (no K / Vt reload past the first stages: the energy of the L2 ->
# shared traffic) and 5 (the tanh form without its MUFU).
# 1. GPU tests (serial): the default's emulation rule at D128 (tensor / head / block x 5 masks), vars 1-3 against
# the fp64 emulation, vars 4 / 5 run their kernels.
# 2. fp8_fwd_split.py --fwd-vars 1,2,3,4,5 --sustain 0.4: burst (interleaved, L2 flushed) then each variant back to
# back for 0.4 s in turn (default first and last) at B16 S16K / S4K D128; D256 S16K the default; nvidia-smi every
# 50 ms beside it (SM clock, power, throttle reasons; smi_digest.py: per window MHz, W, J per call).
# 3. ncu (the time left): the default's 192-key kernel and var 1 at B4 S16K D128: instructions per pipe and per warp
# and tile pair (88,752 pairs), L2 / DRAM bytes.
LIM=40
source .carry/fp8f21/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 15 $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_wide_silu_shares_match_emulating_reference $T::test_cuda_fp8_wide_timing_variants_run_their_kernels \
    -k "shares or timing or (128 and not batch_head)"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
smi_log
bench $(( $(left) - 8 )) --reps 5 --warmup-ms 25 --fwd-vars 1,2,3,4,5 --sustain 0.4 \
    --cases B16S16KD128,B16S4KD128,B16S16KD256
smi_stop
grep -E "^sustained|^\(case|^\(sustain" $OUT/bench.log
echo "== 3. ncu ($SECONDS s)"
ncu21 fp8f21 2 --batch 4 --seqlen 16384 128:0 128:1
echo "== end ($SECONDS s)"
