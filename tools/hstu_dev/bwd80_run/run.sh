#!/bin/bash
# bwd80 (issue 39, session 13): the portable backward of FA2's layout with the grid (batch, key blocks, heads)
# (heaviest key blocks first), dQ-first warps (phases 2 / 3 in opposite orders on a scheduler) and a cheaper SiLU'
# (4 FMAs after the tanh). Branch wheel vs main's in one call, on the H200 (from the repo root, files in
# .carry/bwd80; the branch's tests and sources the tests read in .carry/bwd80/tree):
# 1. GPU tests (branch files): test_sm80_backward_gpu.py, test_kernel_options.py, test_kernels_gpu.py -k sm80 / portable
# 2. time80.py: main cfg 0; branch cfg 0 / 13 (the warps' phases in lockstep) + FA2, interleaved per case
# 3. benchmarks/hstu_attention.py --kernels portable --sweep portable --no-ref --peer fa2: main, branch
# MODE=quick (the lead's 120 s) or full; logs in $OUT; a digest at the end of stdout.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_bwd80}; mkdir -p "$OUT"
MODE=${MODE:-quick}
R=$PWD
C=$R/.carry/bwd80
LIM=${LIM:-118}
left() { echo $((LIM - SECONDS)); }
M=$(ls -d $R/.carry/main13 $C/main 2>/dev/null | head -1)
rm -rf /tmp/site_bwd80 /tmp/site_main
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwd80 $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_main $M/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
echo "main wheel: $(ls $M/hstu_attn-*.whl); gpu $GPU"
PT="python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short --maxfail=5 -rfE"
echo "== 1. GPU tests ($SECONDS s)"
cd $C/tree
if [ $MODE = full ]; then
  PYTHONPATH=/tmp/site_bwd80 timeout 300 $PT tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernel_options.py \
      tests/hstu/test_kernels_gpu.py -k "sm80 or portable or kernel_options" > $OUT/tests.log 2>&1
else
  PYTHONPATH=/tmp/site_bwd80 timeout 45 $PT tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernel_options.py \
      -k "grid_and_phase or context_kernel or long_contexts_drab or kernel_options" > $OUT/tests.log 2>&1
fi
echo "rc $? (124: time ran out; $SECONDS s)"
cd $R
echo "== 2. time80 ($SECONDS s)"
REPS=10; ONLY=""; [ $MODE = quick ] && { REPS=5; ONLY="causal"; }
PYTHONPATH=/tmp/site_main timeout 100 python3 -P $C/time80.py main --cfgs 0 --reps $REPS --only "$ONLY" > $OUT/time.log 2>&1
PYTHONPATH=/tmp/site_bwd80 timeout 200 python3 -P $C/time80.py bwd80 --cfgs 0 13 --fa2 --reps $REPS --only "$ONLY" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
if [ $MODE = full ]; then
  echo "== 3. hstu_attention portable sweep ($SECONDS s)"
  for w in main bwd80; do
    echo "#### $w" >> $OUT/sweep.log
    PYTHONPATH=/tmp/site_$w timeout 100 python3 -P benchmarks/hstu_attention.py --kernels portable --sweep portable \
        --no-ref --peer fa2 --reps 5 --blocks 1 --cooldown 0.2 >> $OUT/sweep.log 2>&1
    echo "rc $? ($SECONDS s)" >> $OUT/sweep.log
  done
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"; grep -E "^FAILED|^ERROR|passed|failed|skipped|rror" $OUT/tests.log | tail -12
echo "#### time80"; grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-220
[ -f $OUT/sweep.log ] && { echo "#### sweep"; grep -E "^####|^\||rc " $OUT/sweep.log | cut -c1-220; }
