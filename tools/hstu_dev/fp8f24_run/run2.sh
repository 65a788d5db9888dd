#!/usr/bin/env bash
# fp8f24 run 2 (issue 36, FP8 forward; <= 42 s). Product wheel of fp8f24: every FP8 forward kernel builds its wgmma
# descriptors from one low word per operand and stage plus constant k-step offsets (the default now; run 1's var 2
# had it with the P register swap, which alone lost); kernel_options(fp8_fwd_var=3) = main's descriptors per k step
# on the default kernels of D128 (192-key tiles) and D256 (grid): main's kernel, in the same process.
# 1. fp8_fwd_split.py first (a cool GPU): B16 S16K D128, S16K D256, S4K D128: default vs var 3 (burst interleaved,
#    L2 flushed; then each sustained 0.6 s, the default first and last); nvidia-smi every 50 ms.
# 2. GPU tests: all of test_fp8.py's GPU tests (-m gpu, 178) with the branch's wheel, in 8 pytest processes side by
#    side (OMP 2 threads each), each under its own timeout (test_kernel_options.py has no GPU test: run on the CPU).
LIM=42
source .carry/fp8f24/setup.sh
echo "== 1. bench ($SECONDS s)"
bench_smi 16 --reps 5 --warmup-ms 25 --fwd-vars 3 --sustain 0.6 --cases B16S16KD128,B16S16KD256,B16S4KD128
echo "== 2. tests ($SECONDS s)"
S=$(( $(left) - 2 ))
g() {  # g TAG -k EXPR [FILES]: one process of test_fp8.py's GPU tests
  local tag=$1 k=$2
  shift 2
  (cd $C/tree && PYTHONPATH=/tmp/site_$NAME OMP_NUM_THREADS=2 timeout -k 1 $S python3 -P -m pytest -v \
      -p no:cacheprovider --import-mode=importlib --tb=short -rfE -m gpu -k "$k" $T "$@" > $OUT/tests_$tag.log 2>&1
   echo "rc $? ($SECONDS s)" >> $OUT/tests_$tag.log)
}
E=test_cuda_fp8_kernel_matches_emulating_reference
Q=test_cuda_dequant_path_matches_its_emulating_reference
g e64 "$E and 64-" &
g e128 "$E and 128-" &
g e256 "$E and 256-" &
g q1 "$Q and (64 or 128)" &
g q2 "$Q and not (64 or 128)" &
g b "test_cuda_fp8_kernel_bn192" &
g s "test_cuda_fp8_silu_forms or test_cuda_fp8_kernel_schedules" &
g r "not ($E or $Q or test_cuda_fp8_kernel_bn192 or test_cuda_fp8_silu_forms or test_cuda_fp8_kernel_schedules)" &
wait
n=0; f=0
for t in e64 e128 e256 q1 q2 b s r; do
  echo "$t: $(tail -1 $OUT/tests_$t.log), $(passed $t) passed, $(grep -c -E ' FAILED| ERROR' $OUT/tests_$t.log) failed"
  grep -E "^FAILED|^ERROR|^E  " $OUT/tests_$t.log | head -4 | cut -c1-200
  n=$(( n + $(passed $t) )); f=$(( f + $(grep -c -E ' FAILED| ERROR' $OUT/tests_$t.log) ))
done
echo "tests: $n passed, $f failed ($SECONDS s)"
echo "== end ($SECONDS s)"
