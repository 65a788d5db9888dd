#!/bin/bash
# bwd15 (issue 39, session 14), run 1 (<= 60 s), from the root of main's tree:
#   OUT=/tmp/o_bwd15 timeout 75 bash .carry/bwd15/run.sh > /tmp/o_bwd15/stdout.txt 2>&1
# 0. background (CPU): FA2's backward kernels' SASS from torch's libtorch_cuda.so (cuobjdump -fun, names by grep)
# 1. GPU tests (branch files in .carry/bwd15/tree): test_sm80_backward_gpu.py (grid / phase order incl. cfg 14 / 15,
#    the key-block limit, context kernel, drab) + test_kernels_gpu.py -k sm80 backward (fa2 layout, d256, contexts)
# 2. time80.py (main's tools/hstu_dev/bwd80_run; run 1 ran a copy of it): main14's wheel cfg 0; branch cfg 0 / 14 /
#    15 + FA2 (causal B16 S4K / S16K, B128 S1K D128, B16 S4K D256)
#    (cfg 14: D = 256 the fixed phase order, D = 128 15 with the S / dQ k-loops unrolled + FA2's phase order dV, dQ,
#    dK; 15: D = 128 dP in one pass, D = 256 14's D = 128 form)
# 3. ncu (one launch each, B16 S16K D128): ours (hstu_bwd_pds_kernel, branch default) and FA2's flash_bwd_dq_dk_dv
LIM=58
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80)
# 0. FA2 SASS in the background
TL=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cuda.so'))")
CO=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
export PATH=$PATH:$(dirname "$CO")
( grep -a -o '_ZN[[:alnum:]_]*flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel[[:alnum:]_]*' "$TL" | sort -u > $OUT/fa2_names.txt
  grep 'Flash_bwd_kernel_traitsILi128ELi64ELi128ELi8E' $OUT/fa2_names.txt | grep -i bfloat > $OUT/fa2_names128.txt
  N=$(paste -sd, $OUT/fa2_names128.txt)
  [ -n "$N" ] && timeout $(( 52 - SECONDS )) "$CO" -sass -arch sm_90 -fun "$N" "$TL" > $OUT/fa2_bwd128.sass 2> $OUT/fa2_sass.err
  echo "fa2 sass rc $? at $SECONDS s" >> $OUT/fa2_sass.err ) &
BG=$!
echo "== 1. GPU tests ($SECONDS s)"
cd $C/tree
# (-v: a line per test as it ends, so a run cut by the timeout still says which passed)
PYTHONPATH=/tmp/site_bwd15 timeout 13 python3 -P -m pytest -v -p no:cacheprovider --import-mode=importlib --tb=short \
    --maxfail=3 -rfE tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernels_gpu.py -k "grid_and_phase or \
    key_blocks or context_kernel or long_contexts_drab or sm80_backward_with_long_contexts or fa2_layout or \
    sm80_d256_backward_layouts" > $OUT/tests.log 2>&1
echo "rc $? (124: time ran out; $SECONDS s): $(grep -c PASSED $OUT/tests.log) passed, $(grep -c -E 'FAILED|ERROR' $OUT/tests.log) failed lines"
cd $R
echo "== 2. time15 ($SECONDS s)"
SH=(--only "B16 S4K D128" S16K S1K "S4K D256")
PYTHONPATH=/tmp/site_bwd15_main timeout 7 python3 -P $T80 main14 --cfgs 0 --reps 5 "${SH[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=/tmp/site_bwd15 timeout 12 python3 -P $T80 bwd15 --cfgs 0 14 15 --fa2 --reps 5 "${SH[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_bwd15 timeout $(( $(left) > 8 ? $(left) - 3 : 5 )) $NCU --clock-control none -k "regex:hstu_bwd_pds_kernel|flash_bwd_dq_dk_dv" -c 2 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section InstructionStats -o $OUT/prof15 -f python3 -P $C/prof15.py > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/prof15.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
$NCU --import $OUT/prof15.ncu-rep --print-details all --print-metric-instances values > $OUT/ncu_details.txt 2>> $OUT/ncu.log
python3 $C/ncu_digest.py $OUT/ncu_raw.csv > $OUT/ncu_digest.md 2>&1
wait $BG  # (its cuobjdump ends by 52 s)
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "bwd15: cfg 0 the default (D256 dQ-first); 14: D256 the fixed order, D128 15 + S / dQ loops unrolled; 15: D128 dP in one pass, D256 = default"
echo "#### ncu"; tail -3 $OUT/ncu.log | cut -c1-300; cut -c1-260 $OUT/ncu_digest.md | head -90
echo "#### fa2 sass"; wc -l $OUT/fa2_names.txt $OUT/fa2_names128.txt $OUT/fa2_bwd128.sass 2>&1 | head -4; tail -2 $OUT/fa2_sass.err 2>/dev/null
