#!/bin/bash
# rabf38 (issue 39, session 35), run 1 (<= 52 s; the branch's wheel: main's objects + the branch's fwd bf16 D = 64 /
# 128 / 256 units and hstu_ops.cc), from the root of main's tree:   OUT=/tmp/out_rabf38 timeout 56 bash .carry/rabf38/run1.sh
# The branch: the bf16 D = 64 forward with rab in 128 x 128 tiles (the causal default's), each warp copying its own
# rab rows per 64-key sub-tile into two slots (FwdSm80QregRabW) instead of 128 x 64 tiles with the block's rab tile
# per KV tile (main's FwdSm80QregRabIlvMma: kernel_options(fwd_sm80_cfg=10), case rab:10). D = 128 / 256: the rab
# tiles inside the sequence copied without per-row predicates (main's predicated copies: fwd_sm80_cfg=11, rab:11).
# 1. GPU tests: test_sm80_forward_rab_smem (D = 64 / 128 / 256 x 6 masks; test_kernel_options.py: 9 passed on CPU).
# 2. Time: bf16 B16 S4K H4 forward D = 64, two processes in opposite case orders; D = 128 / 256 one process.
# 3. ncu (the time left): D = 64 rab, rab:10 (instructions, stalls, tensor pipe, DRAM).
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 17 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabf38 F64a 8 --reps 7 --dims 64 --dirs fwd --cases causal rab rab:10 rab1 rab1:10
bench /tmp/site_rabf38 F64b 8 --reps 7 --dims 64 --dirs fwd --cases rab1:10 rab1 rab:10 rab causal
bench /tmp/site_rabf38 F128 8 --reps 7 --dims 128 256 --dirs fwd --cases causal rab rab:11
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
ncu_bench /tmp/site_rabf38 5 hstu_fwd $M ncu --ncu --dims 64 --dirs fwd --cases rab rab:10 causal
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); rab = D64 128 x 128 tiles, the warps' rab slots;"
echo "#### :10 = main's D64 default (128 x 64 tiles, the block's rab tile); :11 = D128 / D256 main's predicated rab"
echo "#### copies; rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (ID kernel metrics; order: D64 rab, rab:10, causal)"
ncu_metrics $OUT/ncu.csv | head -12
