#!/usr/bin/env bash
# fp8f23 run 2 (issue 36, FP8 forward; <= 40 s). Lab wheel of fp8f23 744c75d (--define hstu_dev=1): run 1's D128
# pairs (fp8_fwd_var=4) hung because their unpaired CTAs loaded half of K (the 96-row map) and waited for the whole
# tile; now every CTA of that kernel loads K in two 96-row halves. Run 1's D256 pairs (vars 1 / 3) passed every test
# and were slower (1.09-1.12x sustained): they leave the final commit, whose FP8 forward is main's (main21's wheel).
# 1. GPU tests, side by side, each process under its own timeout: var 4 (4 cases: the fp64 emulation rule, its
#    kernel, bitwise the default); the final code (main21's wheel, main's test file): the default's emulation rule
#    at D 128 / 256 x tensor / block x causal / context_target_group + the 192-key tile rule.
# 2. fp8_fwd_split.py: B16 S16K / S4K D128 default + var 4 (if its tests passed), then B16 S16K D256 default + var 3
#    (burst interleaved, L2 flushed; then each sustained 0.4 s, default first and last); nvidia-smi every 50 ms.
LIM=40
source .carry/fp8f23/setup.sh
echo "== 1. tests ($SECONDS s)"
L=$T::test_cuda_fp8_lab_variants_match_emulating_reference
lab_test v4 13 $L -k "128-4-" &
(PYTHONPATH=/tmp/site_${NAME}_main OMP_NUM_THREADS=6 timeout -k 1 13 python3 -P -m pytest -v -p no:cacheprovider \
    --import-mode=importlib --tb=short -rfE $T::test_cuda_fp8_kernel_matches_emulating_reference \
    $T::test_cuda_fp8_kernel_wide_tiles_for_long_sequences \
    -k "wide_tiles or ((128 or 256) and (causal or context_target_group) and (tensor or block) and not local)" \
    > $OUT/tests_final.log 2>&1; echo "rc $? ($SECONDS s)" >> $OUT/tests_final.log) &
wait
for t in v4 final; do summary $t; done
V=256:3
[ "$(passed v4)" = 4 ] && V=128:4,$V
echo "== 2. bench, vars '${V}' ($SECONDS s)"
smi_log
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) python3 -P $C/fp8_fwd_split.py --reps 5 --warmup-ms 25 \
    --fwd-vars $V --sustain 0.4 --cases B16S16KD128,B16S4KD128,B16S16KD256 > $OUT/bench.log 2>&1
echo "bench rc $? ($SECONDS s)"
smi_stop
grep -E "^\||^\(case|^\(sustain|^sustained|rror" $OUT/bench.log
echo "== end ($SECONDS s)"
