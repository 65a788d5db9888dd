#!/usr/bin/env bash
# fp8f23 run 1 (issue 36, FP8 forward; <= 40 s). Lab wheel of fp8f23 (fp8f22-pairs 71c62e5 merged, --define
# hstu_dev=1): the relay CTA pairs with the first-use fix (a producer waits for the peer's release of a stage only
# from the stage's second use on): fp8_fwd_var 1 (D256 pairs, 4 stages), 3 (D256 pairs, 3 stages), 4 (D128 pairs,
# 192-key tiles); 2 (D256, 4 stages alone: the control).
# 1. GPU tests, four pytest processes side by side, each under its own timeout (a hang costs its process only):
#    var 3 (2 cases), var 1 (5), var 4 (4), var 2 (2) + kernel_options + the default's emulation rule (D 128 / 256:
#    tensor causal, block context_target_group) + the 192-key tile rule; each variant's first case is tensor causal
#    (phantom slots: the case that hung). Every lab case also checks the default bitwise.
# 2. fp8_fwd_split.py: B16 S16K D256 default + the D256 vars whose tests all passed; B16 S16K / S4K D128 default +
#    var 4 if its tests passed (burst interleaved, L2 flushed; then each sustained 0.4 s, default first and last);
#    nvidia-smi every 50 ms.
LIM=40
source .carry/fp8f23/setup.sh
echo "== 1. tests ($SECONDS s)"
L=$T::test_cuda_fp8_lab_variants_match_emulating_reference
lab_test v3 13 $L -k "256-3-" &
lab_test v1 13 $L -k "256-1-" &
lab_test v4 13 $L -k "128-4-" &
lab_test d 13 tests/hstu/test_kernel_options.py $L $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    -k "256-2- or kernel_options or wide_tiles or 128-causal-tensor or 256-causal-tensor or 128-context_target_group-block or 256-context_target_group-block" &
wait
for t in v3 v1 v4 d; do summary $t; done
V=
[ "$(passed v1)" = 5 ] && V=$V,256:1
[ "$(passed v3)" = 2 ] && V=$V,256:3
[ "$(passed v4)" = 4 ] && V=$V,128:4
V=${V#,}
echo "== 2. bench, vars '${V}' ($SECONDS s)"
smi_log
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) python3 -P $C/fp8_fwd_split.py --reps 5 --warmup-ms 25 \
    ${V:+--fwd-vars $V} --sustain 0.4 --cases B16S16KD256,B16S16KD128,B16S4KD128 > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
smi_stop
grep -E "^\||^\(case|^\(sustain|^sustained|rror" $OUT/bench.log
echo "== end ($SECONDS s)"
