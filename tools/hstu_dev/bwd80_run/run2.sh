#!/bin/bash
# bwd80 (issue 39, session 13), the one device call (merged wheels; <= 60 s): the portable backward of FA2's layout
# with the grid (batch, key blocks, heads) (the heaviest key blocks first), the dS factor in 3 FMAs and the SiLU pass
# of full tiles without mask selects, all the default; kernel_options(bwd_sm80_cfg=13) adds dQ-first warps (opt-in).
# From the root of main's tree:
#   OUT=/tmp/o_bwd80 timeout 135 bash .carry/bwd80/run2.sh > /tmp/o_bwd80/stdout.txt 2>&1
# 1. GPU tests (the branch's files, .carry/bwd80/tree): test_sm80_backward_gpu.py -k "grid_and_phase or
#    context_kernel", test_kernel_options.py -k "bits_match or pack_and_restore"
# 2. time80.py (ms, median of 5): main13's wheel cfg 0; the merged wheel cfg 0 / 13 + FA2 (torch SDPA flash)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/o_bwd80}; mkdir -p "$OUT"
R=$PWD
C=$R/.carry/bwd80
left() { echo $((58 - SECONDS)); }
rm -rf /tmp/site_bwd80 /tmp/site_bwd80_main
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwd80 $C/whl/hstu_attn-*.whl 2>&1 | grep -v WARN | tail -2
python3 -m pip install -q --no-deps --no-index --no-compile --target /tmp/site_bwd80_main $R/.carry/main13/hstu_attn-*.whl \
    2>&1 | grep -v WARN | tail -2
GPU=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader)
echo "== 1. GPU tests ($SECONDS s)"
cd $C/tree
PYTHONPATH=/tmp/site_bwd80 timeout 24 python3 -P -m pytest -q -p no:cacheprovider --import-mode=importlib --tb=short \
    --maxfail=3 -rfE tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernel_options.py \
    -k "grid_and_phase or context_kernel or bits_match or pack_and_restore" > $OUT/tests.log 2>&1
echo "rc $? (124: time ran out; $SECONDS s)"
cd $R
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd80_main timeout $(( $(left) > 30 ? 13 : 8 )) python3 -P $C/time80.py main13 --cfgs 0 --reps 5 \
    --only "B16 S4K D128" S16K S1K "S4K D256" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd80 timeout $(( $(left) > 4 ? $(left) : 4 )) python3 -P $C/time80.py merged --cfgs 0 13 --fa2 \
    --reps 5 --only "B16 S4K D128" S16K S1K "S4K D256" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"; grep -E "^FAILED|^ERROR|passed|failed|skipped|rror" $OUT/tests.log | tail -8
echo "#### time80 (ms (TFLOP/s); main13 = main bb22ca5's wheel; merged: cfg 0 = the default, 13 = dQ-first warps)"
grep -E "^###|^\| |rror" $OUT/time.log | cut -c1-200
