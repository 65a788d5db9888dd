#!/bin/bash
# rab40 (issue 39, session 37), run 1 (<= 53 s; the branch's wheel: main40's objects + the branch's fwd bf16 D = 64 /
# 128 units and hstu_ops.cc), from the root of main's tree:   OUT=/tmp/out_rab40 timeout 56 bash .carry/rab40/run1.sh
# The branch: D = 64's rab kernel with the lane parts of its K / V fragment and rab slot addresses once per block
# (FwdSm80QregRabWH, no cache hint); D = 128's with its rab pairs by ldmatrix.x4 (FwdSm80QregRabL128). Main40's
# kernels (FwdSm80QregRabW, FwdSm80QregRabF128) by kernel_options(fwd_sm80_cfg=9) (case rab:9), same process.
# 1. GPU tests: test_sm80_forward_rab_smem (D = 64 / 128 / 256 x 6 masks; cfg 0 == cfg 9 bit for bit).
# 2. Time: bf16 B16 S4K H4 forward D = 64 and 128, causal / rab / rab:9 / rab1 / rab1:9, two case orders.
# 3. ncu (the time left): D = 64 / 128 rab, rab:9 (warp instructions, stalls, issue, DRAM).
LIM=53
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 15 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rab40 Fa 11 --reps 7 --dims 64 128 --dirs fwd --cases causal rab rab:9 rab1 rab1:9
bench /tmp/site_rab40 Fb 11 --reps 7 --dims 64 128 --dirs fwd --cases rab1:9 rab1 rab:9 rab causal
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread
M=$M,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
M=$M,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active
M=$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
M=$M,dram__bytes_read.sum
ncu_bench /tmp/site_rab40 5 hstu_fwd $M ncu --ncu --dims 64 128 --dirs fwd --cases rab rab:9
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (branch wheel, sm90=False; ms (ratio to causal); rab = D64 lane parts once (RabWH), D128 rab pairs by"
echo "#### ldmatrix (RabL128); :9 = main40's kernels (RabW, RabF128); rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (ID kernel metrics; order: D64 rab, rab:9, D128 rab, rab:9)"
ncu_metrics $OUT/ncu.csv | head -12
