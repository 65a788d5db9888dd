#!/usr/bin/env bash
# fp8f20 run 2 (issue 36, FP8 forward; <= 40 s): the branch's final product wheel (no dev variants). Run 1's
# variants all lost (D128 192-key: 4 stages with / without early waits, the pipelined tanh; D256 96-key tiles with
# 3 / 4 stages), so the FP8 forward is main's code less the private 96-key D256 kernel (fp8_fwd_var=6) and its paths.
# 1. The GPU tests of test_fp8.py but the dequantize path's (8 pytest-xdist workers) for 17 s.
# 2. fp8_fwd_split.py --default-only in two processes, main19's wheel then the branch's (the same kernels), each
# with 0.5 s of back-to-back calls per case after the timing; nvidia-smi's SM clock / power / throttle reasons
# every 50 ms beside them (smi_digest.py: per case and per sustained window).
LIM=40
source .carry/fp8f20/setup.sh
echo "== 1. tests ($SECONDS s)"
T=tests/hstu/test_fp8.py
gpu_tests 17 $T -n 8 -m gpu -k "not dequant_path"
grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.log | tail -6
echo "== 2. bench ($SECONDS s)"
smi_log
for w in main fp8f20; do
  site=/tmp/site_fp8f20_main secs=$(( ($(left) - 1) / 2 ))
  [ $w = fp8f20 ] && site=/tmp/site_fp8f20 secs=$(( $(left) - 1 ))
  PYTHONPATH=$site timeout $secs python3 -P $C/fp8_fwd_split.py --default-only \
      --reps 5 --warmup-ms 25 --sustain 0.5 --cases B16S16KD128,B16S4KD128,B16S16KD256 > $OUT/bench_$w.log 2>&1
  echo "$w rc $? ($SECONDS s)"
  grep -E "^\||rror|^\(" $OUT/bench_$w.log
done
smi_stop_2() {
  [ -n "$SMI_PID" ] && kill $SMI_PID 2> /dev/null
  wait $SMI_PID 2> /dev/null
  for w in main fp8f20; do echo "smi beside $w:"; python3 $C/smi_digest.py $OUT/smi.csv $OUT/bench_$w.log; done
}
smi_stop_2
echo "== end ($SECONDS s)"
