#!/bin/bash
# bwdw34 (issue 39, session 31), run 2 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/out_bwdw34 timeout 56 bash .carry/bwdw34/run2.sh
# (carry: bash tools/hstu_dev/bwdw34_run/pack.sh /work/main/.carry/bwdw34; the wheel of run 1)
# 1. time again: cfg 13 / 0 / FA2 (cfg 13 first this time: the column place) at B16 S4K D256 (batch first) and B128
#    S1K D256 (heads first), median of 7, interleaved
# 2. ncu at B16 S4K D256 (cfg 0, cfg 13; one launch each): instructions, stalls, tensor pipe, shared-memory
#    wavefronts and bank conflicts a (64 x 64) pair
# 3. GPU tests in the time left: the D = 256 cases run 1 did not reach (the loop test, batch first, the tail order,
#    the smem epilogue, the dQ workspace layouts)
LIM=49 NAME=bwdw34 BASE=main34
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 13 python3 -P $B21 time --label $NAME --cfgs 13 0 --reps 7 \
    --impls ours fa2 --shapes B16:S4096:D256 B128:S1024:D256 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 14 $NCU --clock-control none -k "regex:hstu_bwd_pds" -c 2 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,gpu__time_duration.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sass__inst_executed_per_opcode \
    -o $OUT/d256 -f python3 -P $B21 ncu --cfgs 0 13 --impls ours --shapes B16:S4096:D256 > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/d256.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
    > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
# (64 x 64 pairs at D = 256: twice bwd21's 64 x 128 count)
PAIRS=$(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}')
python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs $(( 2 * ${PAIRS:-0} )) > $OUT/ncu_digest.md 2>&1
echo "== 3. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
gpu_tests $(( $(left) > 4 ? $(left) - 2 : 1 )) $T::test_sm80_backward_mbar_batch_first \
    $T::test_sm80_backward_tail_blocks_first $T::test_sm80_backward_smem_epilogue \
    $T::test_sm80_backward_dq_workspace_layouts $T::test_sm80_backward_one_barrier -k "256 or mbar"
digest "cfg 0 = the default (main's D = 256 kernel); 13 = S / dP split over D across warp pairs"
echo "#### ncu (B16 S4K D256: cfg 0, cfg 13; per warp and (64 x 64) pair)"
grep -E "^\| metric|gpu__time|inst_executed.sum |per warp and pair |issue_active.avg.pct|tensor.*pct|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|not_selected|dispatch|branch)|wavefronts|bank_conflicts|registers|per HMMA|per warp and pair" \
    $OUT/ncu_digest.md 2>/dev/null | cut -c1-220
tail -2 $OUT/ncu.log | cut -c1-200
grep -E "PASSED|FAILED" $OUT/tests.log | sed 's/\[.*//' | sort | uniq -c
