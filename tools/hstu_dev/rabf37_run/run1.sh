#!/bin/bash
# rabf37 (issue 39, session 34), run 1 (<= 50 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_rabf37 timeout 56 bash .carry/rabf37/run1.sh
# The branch: the bf16 forward with rab (D = 64 / 128) adds rab by the tensor cores (an identity MMA per m16 tile and
# 8 keys, rab's B fragments by ldmatrix.trans from the shared-memory tile) instead of an LDS per key pair and an
# unpack + FADD / FFMA per score; D = 64 also with three rab buffers (copies two KV steps ahead, the third in Q's).
# Cases: rab = the branch's default; rab:9 = main's default (kernel_options(fwd_sm80_cfg=9): the rab added per score);
# rab:10 = D = 64's MMA kernel with two buffers; rab~10 = main's old per-element path (fwd_sm80_cfg=8).
# 1. GPU tests: test_sm80_forward_rab_smem (D = 64 / 128 / 256 x 6 masks; error rule, poisoned, variants agree).
# 2. Time: bf16 B16 S4K H4 forward, CUDA graphs, interleaved, one process per head dim.
# 3. ncu (the time left): D = 64 rab, rab:9 (stalls, tensor pipe, DRAM).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 18 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabf37 B64 11 --reps 7 --dims 64 --dirs fwd --cases causal rab rab:9 rab:10 rab1 rab1:9
bench /tmp/site_rabf37 B128 9 --reps 7 --dims 128 --dirs fwd --cases causal rab rab:9 rab1 rab1:9
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
ncu_bench /tmp/site_rabf37 5 hstu_fwd $M ncu --ncu --dims 64 --dirs fwd --cases rab rab:9
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); rab = rab by MMA (D64: 3 buffers); :9 = main's"
echo "#### default (rab per score); :10 = D64 MMA with 2 buffers; rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (ID kernel metrics; order: D64 rab, rab:9)"
ncu_metrics $OUT/ncu.csv | head -12
