#!/bin/bash
# rabf37 (issue 39, session 34), run 2 (<= 52 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_rabf37 timeout 56 bash .carry/rabf37/run2.sh
# The branch: the bf16 forward with rab adds it by the tensor cores at D = 64 / 128 / 256 (m16n8k8 MMAs, rab as A by
# ldmatrix from the shared-memory tile, the 8 x 8 identity as B) after S's MMAs (run 1: D64 1.077x faster than
# main's per-score add, D128 1.03x slower); the three-buffer ring of run 1 dropped (no gain: 0.5531 vs 0.5546 ms).
# Cases: rab = the branch's default (MMAs after S); rab:9 = main's default (kernel_options(fwd_sm80_cfg=9): the rab
# added per score); rab:10 = the MMAs before S (S's accumulators start as rab).
# 1. GPU tests: test_sm80_forward_rab_smem (D = 64 / 128 / 256 x 6 masks).
# 2. Time: bf16 B16 S4K H4 forward, CUDA graphs, interleaved: D = 256, then D = 64 / 128 in the reverse case order.
# 3. ncu (the time left): D = 128 rab, rab:9.
LIM=52
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 18 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabf37 C256 9 --reps 7 --dims 256 --dirs fwd --cases causal rab rab:9 rab:10 rab1
bench /tmp/site_rabf37 C64 8 --reps 7 --dims 64 --dirs fwd --cases rab1 rab:10 rab:9 rab causal
bench /tmp/site_rabf37 C128 8 --reps 7 --dims 128 --dirs fwd --cases rab:10 rab:9 rab causal
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
ncu_bench /tmp/site_rabf37 5 hstu_fwd $M ncu --ncu --dims 128 --dirs fwd --cases rab rab:9
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); rab = rab by MMAs after S; :9 = main's"
echo "#### default (rab per score); :10 = the MMAs before S; rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (ID kernel metrics; order: D128 rab, rab:9)"
ncu_metrics $OUT/ncu.csv | head -12
