#!/usr/bin/env bash
# fp8f20 run 1 (issue 36, FP8 forward; <= 40 s). New private variants of the D128 192-key kernel
# (kernel_options(fp8_fwd_var=...)): 1 four K / Vt stages (output staged over the K stages) with the next tile's
# mbarrier waits under the S wait, 2 four stages alone, 3 each tanh word's MUFU ops issued two tanh words before its
# FFMAs (MUFU results in flight across the half2 words), 4 all three; 5 var 3 with the clock stamps.
# 1. GPU tests: the default's emulation rule at D128 (tensor / head / block x 5 masks), the variants against the fp64
# emulation and bitwise the default (tensor / head; block: the default's kernel), the stamp variants, D256's 96-key
# tiles with 3 / 4 stages (tensor mode).
# 2. fp8_fwd_split.py: the default (main's kernels: the same instantiations) against vars 1-4 in one process at
# S16K / S8K / S4K D128, vars 6 / 7 (96-key tiles, 3 / 4 stages) at D256 S16K / S8K / S4K, the stamps of the
# default and of var 3;
# nvidia-smi's SM clock / temperature / power / throttle reasons every 50 ms beside it (smi_digest.py per case).
LIM=40
source .carry/fp8f20/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 17 $T::test_cuda_fp8_kernel_matches_emulating_reference $T::test_cuda_fp8_fwd_schedule_variants \
    $T::test_cuda_fp8_fwd_trace_variant $T::test_cuda_fp8_d256_key_tiles \
    -k "schedule or trace or (128 and not batch_head) or (d256 and tensor)"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
smi_log
bench $(( $(left) - 1 )) --reps 5 --warmup-ms 25 --vars 1,2,3,4,6,7 --trace \
    --cases B16S16KD128,B16S8KD128,B16S4KD128,B16S16KD256,B16S8KD256,B16S4KD256
smi_stop
grep -E "^trace|^\(case" $OUT/bench.log
echo "== end ($SECONDS s)"
