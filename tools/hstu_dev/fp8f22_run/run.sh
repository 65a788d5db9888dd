#!/usr/bin/env bash
# fp8f22 run 1 (issue 36, FP8 forward D = 256, sustained under the 700 W cap; <= 40 s). Lab wheel of branch fp8f22
# (product config + private lab variants of the D256 64-key grid kernel, kernel_options(fp8_fwd_var=...)):
#   1: clusters of two CTAs (adjacent query tiles) sharing each K / Vt tile by TMA multicast, the peer's releases
#      forwarded by a relay thread (off the consumers' path), 4 stages;  2: 4 stages alone;  3: the pairs, 3 stages.
# 1. GPU tests (serial): the lab variants vs the fp64 emulation and bitwise the default (9), the default at D256
#    (tensor / block x 5 masks), kernel_options parsing.
# 2. fp8_fwd_split.py: B16 S16K D256 default + vars (burst interleaved, L2 flushed; then each sustained 0.4 s, the
#    default first and last), then B16 S16K / S4K D128 default (burst + 0.4 s sustained); nvidia-smi every 50 ms.
LIM=40
source .carry/fp8f22/setup.sh
T=tests/hstu/test_fp8.py
echo "== 1. tests ($SECONDS s)"
gpu_tests 15 tests/hstu/test_kernel_options.py $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_d256_lab_variants_match_emulating_reference \
    -k "lab_variants or (kernel_matches and 256 and (tensor or block)) or kernel_options" --maxfail=30
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -8
VARS=2
[ $(grep -c "test_cuda_fp8_d256_lab_variants.*PASSED" $OUT/tests.log) = 9 ] && VARS=1,2,3
echo "== 2. bench, D256 vars $VARS ($SECONDS s)"
smi_log
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 14 )) python3 -P $C/fp8_fwd_split.py --reps 5 --warmup-ms 25 \
    --fwd-vars $VARS --sustain 0.4 --cases B16S16KD256 > $OUT/bench.log 2>&1
echo "bench D256 rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) python3 -P $C/fp8_fwd_split.py --reps 5 --warmup-ms 25 \
    --default-only --sustain 0.4 --cases B16S16KD128,B16S4KD128 >> $OUT/bench.log 2>&1
echo "bench D128 rc $? ($SECONDS s)"
smi_stop
grep -E "^\||^\(case|^\(sustain|^sustained|rror" $OUT/bench.log
echo "== end ($SECONDS s)"
