#!/bin/bash
# bwd18 (issue 39, session 17), run 1 (<= 40 s; wheel of 3624eed: the opt-in bwd_sm80_dq_frag switch, removed after it),
# from the root of main's tree:
#   OUT=/tmp/o_bwd18 timeout 60 bash .carry/bwd18/run.sh > /tmp/o_bwd18/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd18_run/pack.sh /work/main/.carry/bwd18: this script, tools/hstu_dev/bwd15_run/setup.sh,
# time18.py, prof18.py, ncu18.py, the wheel in whl/, the branch's tests/conftest.py and tests/hstu/{hstu_kernel_checks,
# test_sm80_backward_gpu}.py in tree/)
# The sm80-class backward's dQ into a fragment-ordered workspace (kernel_options(sm90=False, bwd_sm80_dq_frag=n), bf16):
# f1 red.global.add.v4.f32 (8 a warp and tile pair at D = 128, 4 lines each), f2 scalar red (32, 1 line each); the
# default adds into the row-major workspace with 16 red.v2 of 8 lines each.
# 1. GPU tests: test_sm80_backward_dq_frag (D 128 / 256; causal, local + targets + rab + delta-q + seqused, rab):
#    against the fp32 reference, dK / dV / drab bitwise the default's, fp16 and contexts raise
# 2. time18.py: default, f1, f2 (D128), FA2; main17's wheel (default)
# 3. ncu (if time is left): B16 S4K D128 default, f1, f2: reduction requests / sectors, lg_throttle
NAME=bwd18 MAIN=main17 LIM=40
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, wheels, GPU, TF, TK, gpu_tests)
T18=$C/time18.py
SH=(--only "B16 S4K D128" S16K S1K D256)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 14 $TF::test_sm80_backward_dq_frag
echo "== 2. time18 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 12 python3 -P $T18 $NAME --vars 0 f1 f2@D128 --fa2 --reps 5 "${SH[@]}" \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_${NAME}_main timeout 6 python3 -P $T18 $MAIN --vars 0 --reps 3 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
RED=l1tex__t_requests_pipe_lsu_mem_global_op_red.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ $(left) -gt 8 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 2 )) $NCU --clock-control none -k "regex:hstu_bwd_pds" -c 3 \
      --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,lts__t_sectors_op_red.sum,$RED \
      -o $OUT/prof18 -f python3 -P $C/prof18.py --runs 4096:0 4096:f1 4096:f2 > $OUT/ncu.log 2>&1
  echo "rc $? ($SECONDS s)"
  $NCU --import $OUT/prof18.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
      > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
  python3 $C/ncu18.py $OUT/ncu_raw.csv --pairs $(grep -o "pairs [0-9]*" $OUT/ncu.log | awk '{printf "%s ", $2}') \
      > $OUT/ncu_digest.md 2>&1
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/ PASSED.*\| FAILED.*//' | sed 's/\[.*//' | sort | uniq -c
echo "#### time18 (ms (TFLOP/s); 0 the default, f1 fragment-ordered dQ with red.v4, f2 with scalar red; $MAIN main)"
grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-220
echo "#### ncu (S4K D128: default, f1, f2)"
tail -2 $OUT/ncu.log 2>/dev/null | cut -c1-200
grep -E "gpu__time|stall|inst|red|hit" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
