#!/bin/bash
# bwdw33 (issue 39, session 30), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwdw33 timeout 56 bash .carry/bwdw33/run1.sh > /tmp/o_bwdw33/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwdw33_run/pack.sh /work/main/.carry/bwdw33)
# Wheel: D = 256's sm_90+ one-barrier loop (kBwdPdsD256OneBar) with P / dS by stmatrix and the Q / dO copies from
# pointers formed once per key block (kPdsStsmPdS | kPdsPtrCopies, D = 128's flags since session 27), the default;
# cfg 10 = main's D = 256 loop (its SASS), 11 = stmatrix alone, 12 = the pointer copies alone; cfg 13 at D = 128 /
# 256 = the default with each warp's own dK / dV epilogue (kPdsWarpEpilogue, no block barrier). D = 128's default
# unchanged. (pack.sh --main-wheel: main's wheel instead, every cfg its default at D = 256: the spread)
# 1. time: cfg 0 / 10 / 11 / 12 / 13 / FA2 at B16 S4K D256 (batch first), B128 S1K D256 / D128 (heads first),
#    median of 7, interleaved (at D = 128 cfgs 10-12 run D = 128's older loops)
# 2. ncu at B16 S4K D256 (the default, cfg 10, FA2; one launch each): issue / tensor pipe, stalls, instructions,
#    shared-memory wavefronts and ldmatrix per MMA
# 3. GPU tests in the time left: test_sm80_backward_stsm_pds at D = 256 (cfgs 10-12 against the fp32 reference and
#    bitwise the default's dK / dV / drab), the kernel that runs at D = 256, the default kernel's name
LIM=49 NAME=bwdw33 BASE=main33
source "$(dirname "$0")/setup.sh"  # (bwd28's: OUT, R, C, left, the branch's wheel, gpu_tests, digest)
echo "== 1. time ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 16 python3 -P $B21 time --label $NAME --cfgs 0 10 11 12 13 --reps 7 \
    --impls ours fa2 --shapes B16:S4096:D256 B128:S1024:D256 B128:S1024:D128 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
PYTHONPATH=/tmp/site_$NAME timeout 15 $NCU --clock-control none -k "regex:hstu_bwd_pds|flash_bwd_dq_dk_dv" -c 3 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,gpu__time_duration.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sass__inst_executed_per_opcode \
    -o $OUT/d256 -f python3 -P $B21 ncu --cfgs 0 10 --impls ours fa2 --shapes B16:S4096:D256 > $OUT/ncu.log 2>&1
echo "rc $? ($SECONDS s)"
$NCU --import $OUT/d256.ncu-rep --print-kernel-base mangled --page raw --csv --print-metric-instances values \
    > $OUT/ncu_raw.csv 2>> $OUT/ncu.log
# (64 x 64 pairs at D = 256: twice bwd21's 64 x 128 count)
PAIRS=$(grep -o "pairs [0-9]*" $OUT/ncu.log | head -1 | awk '{print $2}')
python3 $C/ncu_digest.py $OUT/ncu_raw.csv --pairs $(( 2 * ${PAIRS:-0} )) > $OUT/ncu_digest.md 2>&1
echo "== 3. GPU tests ($SECONDS s)"
T=tests/hstu/test_sm80_backward_gpu.py
# (pack.sh --main-wheel: main's wheel in the branch's place, no branch code to test)
[ -f $C/whl/MAIN ] && echo "main's wheel carried: no tests" || gpu_tests $(( $(left) > 4 ? $(left) - 2 : 1 )) $T::test_sm80_backward_stsm_pds \
    $T::test_sm80_backward_one_barrier_runs_its_kernel tests/hstu/test_kernels_gpu.py::test_sm80_backward_candidate_runs_its_kernel \
    $T::test_sm80_backward_smem_epilogue -k "256 or (epilogue and 128)"
digest "cfg 0 = the default (D = 256: stmatrix P / dS + pointer copies); 10 = main's loop; 11 = stmatrix alone; 12 = pointer copies alone; 13 = 0 + the warps' own epilogue"
echo "#### ncu (B16 S4K D256: the default, cfg 10, FA2; per warp and (64 x 64) pair)"
grep -E "^\| metric|gpu__time|inst_executed.sum |per warp and pair |issue_active.avg.pct|tensor.*pct|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|not_selected|dispatch|branch)|wavefronts|bank_conflicts|registers|per HMMA|per warp and pair" \
    $OUT/ncu_digest.md 2>/dev/null | cut -c1-220
tail -2 $OUT/ncu.log | cut -c1-200
