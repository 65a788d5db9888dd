#!/usr/bin/env bash
# fp8f19 run 3 (issue 36, FP8 forward; <= 30 s): the branch's final code. D = 256 in grid order outside block mode
# now runs 96-key tiles whose warpgroups wait for the next tile's mbarriers under the S wait (run 2's var 5: 0.978x the
# time of the 64-key tiles at B16 S16K); fp8_fwd_var keeps 6 (the 64-key tiles, for comparisons) and 15 (stamps).
# D = 128 is main's code (run 2: the early waits on 192-key tiles cost 1.094x at S16K). 1. GPU tests: the D256 tile
# rule and both widths against the fp64 emulation, the stamp variant, the emulation rule at D256 (tensor / head x
# masks: the 96-key path), seqused / fp16 out / GR mask, the schedules, the wide-tile rule, graph capture, as many
# as 15 s allow; 2. fp8_fwd_split.py: the default against var 6 at D256 S16K / S4K (one process) + D128 S16K, stamps.
LIM=30
source .carry/fp8f19/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 15 $T::test_cuda_fp8_d256_key_tiles $T::test_cuda_fp8_fwd_trace_variant \
    $T::test_cuda_fp8_kernel_matches_emulating_reference $T::test_cuda_fp8_kernel_seqused_float16_out_and_gr_mask \
    $T::test_cuda_fp8_kernel_schedules_match $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    $T::test_cuda_graph_capture_of_fp8_call -k "not emulating or (256 and (tensor or head))"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
bench $(( $(left) - 1 )) --reps 5 --warmup-ms 25 --vars 6 --trace --cases B16S16KD256,B16S4KD256,B16S16KD128
grep "^trace" $OUT/bench.log
echo "== end ($SECONDS s)"
