#!/bin/bash
# rabf38 (issue 39, session 35), run 2 (<= 52 s; the branch's wheel: main's objects + the branch's fwd bf16 D = 64 /
# 128 / 256 units and hstu_ops.cc), from the root of main's tree:   OUT=/tmp/out_rabf38 timeout 56 bash .carry/rabf38/run2.sh
# The branch since run 1: D = 128's rab kernel (FwdSm80QregRabF128) also starts S's accumulators as the rab tile's
# values (RABI: no FADD per score; the MMAs add Q K^T to it) beside its unpredicated rab copies; main's kernel:
# kernel_options(fwd_sm80_cfg=11), case rab:11. D = 64 (FwdSm80QregRabW: 128 x 128 tiles, each warp's rab rows per
# sub-tile; main's 128 x 64 kernel: fwd_sm80_cfg=10, rab:10) and D = 256 as in run 1.
# 1. GPU tests: test_sm80_forward_rab_smem (D = 64 / 128 / 256 x 6 masks; test_kernel_options.py: passed on CPU).
# 2. Time: bf16 B16 S4K H4 forward: D = 128 two processes in opposite case orders, D = 64 / 256 one.
# 3. ncu (the time left): D = 128 rab, rab:11.
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 15 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabf38 F128a 7 --reps 7 --dims 128 --dirs fwd --cases causal rab rab:11 rab1 rab1:11
bench /tmp/site_rabf38 F128b 7 --reps 7 --dims 128 --dirs fwd --cases rab1:11 rab1 rab:11 rab causal
bench /tmp/site_rabf38 F64 9 --reps 7 --dims 64 256 --dirs fwd --cases causal rab rab:10 rab:11
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
ncu_bench /tmp/site_rabf38 5 hstu_fwd $M ncu --ncu --dims 128 --dirs fwd --cases rab rab:11 causal
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); rab = D64 128 x 128 tiles with the warps' rab"
echo "#### slots, D128 unpredicated rab copies + rab as S's start, D256 unpredicated copies; :10 = main's D64 kernel"
echo "#### (D128 / D256: = rab); :11 = main's D128 / D256 kernels (D64: = rab); rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (ID kernel metrics; order: D128 rab, rab:11, causal)"
ncu_metrics $OUT/ncu.csv | head -12
