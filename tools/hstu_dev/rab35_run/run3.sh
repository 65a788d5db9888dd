#!/bin/bash
# rab35 (issue 39, session 32), run 3 (<= 50 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_rab35 timeout 56 bash .carry/rab35/run3.sh
# The branch: the portable forward's bf16 defaults with rab (D = 64 / 128 at long rows, 256; no contexts) copy each KV
# tile's rab tile into shared memory with its K / V (FwdSm80QregRab, hstu_fwd_qreg_rab_kernel; D = 256
# FwdSm80PairsPfRab, hstu_fwd_xpf_rab_kernel: one 8 KB buffer loaded with K); fp8_fwd_var=10 = main's rab path
# (per-element global loads after the S MMAs).
# 1. GPU tests (the branch's test file): test_sm80_forward_rab_smem (D = 64 / 128 / 256, masks, delta-q, seqused,
#    rab per head / shared, against the fp32 reference and main's path; unaligned rows run main's kernel).
# 2. Time (one process per order): bf16 B16 S4K H4 forward, causal, rab / rab1 with the branch's default and ~10.
# 3. ncu (the time left): one launch each of D = 256 rab, rab~10 (a few metrics).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
F="causal rab rab~10 rab1 rab1~10"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
bench /tmp/site_rab35 B1 $(( $(left) / 2 - 2 )) --reps 5 --dims 128 64 256 --dirs fwd --cases $F
bench /tmp/site_rab35 B2 $(( $(left) - 6 )) --reps 5 --dims 256 128 64 --dirs fwd --cases $(rev $F)
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum
if [ -n "$NCU" ] && [ $(left) -gt 5 ]; then
  PYTHONPATH=/tmp/site_rab35 timeout $(( $(left) )) $NCU --clock-control none -k regex:hstu_fwd --metrics $M --csv \
      python3 -P $J ncu --ncu --dims 256 --dirs fwd --cases rab rab~10 > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "rc $? (ncu, $SECONDS s)"
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); ~10 = fp8_fwd_var=10: main's rab path;"
echo "#### rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (D256 fwd: rab (the branch), rab~10 (main's path))"
python3 - $OUT/ncu.csv <<'PY' 2>&1 | head -6
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, mi, vi, ii = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value"), head.index("ID")
out = {}
for r in rows[1:]:
    out.setdefault((r[ii], r[ki][:32]), {})[r[mi].replace("smsp__average_warps_issue_stalled_", "st_")] = r[vi]
for (i, k), m in out.items():
    print(i, k, " ".join(f"{a}={b}" for a, b in sorted(m.items())))
PY
