#!/bin/bash
# bwd30 (issue 39, session 27), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd30 timeout 56 bash .carry/bwd30/run2.sh > /tmp/o_bwd30/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd30_run/pack.sh /work/main/.carry/bwd30)
# Wheel: cfg 10 (bf16, D = 64 / 128, sm_90+, calls without contexts): the default's one-barrier loop with P and dS
# stored by stmatrix.x4 (kPdsStsmPdS: 8 stores a thread and tile pair instead of 32); cfg 11: that with the next
# tile's Q / dO copies from pointers formed once per key block (kPdsPtrCopies); the default kernels are main's.
# 1. GPU tests: cfg 10 / 11 against the fp32 reference and bitwise against the default (D = 64 / 128, both grid
#    orders, causal / local + targets + rab + delta-q / target groups + rab / no mask + delta-q), which kernel runs
# 2. time: cfg 0 (main's kernels) / 10 / 11 / FA2 at B16 S8K / S4K D64, B16 S4K / S16K D128, B128 S1K D128
# 3. ncu (the time left): instructions per warp and pair, stalls, of cfg 0 / 10 / 11 at B2 S8K D64
LIM=49
NAME=bwd30
BASE=main30
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
T=tests/hstu/test_sm80_backward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 16 $T::test_sm80_backward_stsm_pds $T::test_sm80_backward_one_barrier_runs_its_kernel \
    -k "stsm or kernel[64 or kernel[128"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 16 python3 -P $B21 time --label $NAME --cfgs 0 10 11 --reps 5 --impls ours fa2 \
    --shapes B16:S8192:D64 B16:S4096:D64 B16:S4096:D128 B128:S1024:D128 B16:S16384:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 8 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) $NCU --clock-control none -k "regex:hstu_bwd_pds" -c 3 \
      --section WarpStateStats --section InstructionStats --section SpeedOfLight --metrics smsp__inst_executed.sum \
      -o $OUT/ncu30 -f python3 -P $C/prof17.py --batch 2 --runs 64:8192:0 64:8192:c10 64:8192:c11 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/ncu30.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  PAIRS=$(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}')
  python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs ${PAIRS:-1} > $OUT/ncu_digest.md 2>&1
fi
digest "cfg 0 = the default (main's kernels); cfg 10 = P / dS by stmatrix; cfg 11 = 10 + Q / dO copies from pointers"
echo "#### ncu (B2 S8K D64: cfg 0, cfg 10, cfg 11; per warp and (64 x 128) pair)"
S="wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|not_selected|dispatch|branch|no_inst|lg"
P="inst_executed.sum |per warp and pair|issue_active.avg.pct|pipe_tensor.*hmma.*pct|gpu__time|registers"
grep -E "$P|stalled_($S)" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
