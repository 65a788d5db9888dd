#!/bin/bash
# rab35 (issue 39, session 32), run 4 (<= 50 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_rab35 timeout 56 bash .carry/rab35/run4.sh
# The branch (run 3's kernels) + D = 64's rab tiles with the fully visible sub-tiles in FwdSm80QregIlv's interleaved
# 16-key groups, each group's rab added before its SiLU (FwdSm80QregRabIlv, the default there; "!" =
# fwd_sm80_interleave=False: run 3's FwdSm80QregRab<64>); ~10 = main's rab path.
# 1. GPU tests: test_sm80_forward_rab_smem (D = 64 / 128 / 256; D = 64's groups bit for bit its plain body).
# 2. Time (one process per order): bf16 B16 S4K H4 forward, D = 64 causal, rab, rab!, rab~10, rab1, rab1!; D = 128
#    causal, rab, rab~10 (the score pass's rab add as a lambda now: the same code expected).
# 3. ncu (the time left): D = 64 rab, rab! (a few metrics).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 20 "rab_smem" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
F="causal rab rab! rab~10 rab1 rab1!"
rev() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }
bench /tmp/site_rab35 B1 $(( $(left) / 2 - 3 )) --reps 7 --dims 64 --dirs fwd --cases $F
bench /tmp/site_rab35 B2 $(( $(left) / 2 + 1 )) --reps 7 --dims 64 --dirs fwd --cases $(rev $F)
bench /tmp/site_rab35 B3 $(( $(left) - 7 )) --reps 5 --dims 128 --dirs fwd --cases causal rab rab~10
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
if [ -n "$NCU" ] && [ $(left) -gt 5 ]; then
  PYTHONPATH=/tmp/site_rab35 timeout $(( $(left) )) $NCU --clock-control none -k regex:hstu_fwd --metrics $M --csv \
      python3 -P $J ncu --ncu --dims 64 --dirs fwd --cases rab rab! > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "rc $? (ncu, $SECONDS s)"
fi
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; ms (ratio to causal); ! = fwd_sm80_interleave=False (run 3's D = 64"
echo "#### kernel); ~10 = fp8_fwd_var=10: main's rab path; rab (B,H,S,S) / rab1 (B,1,S,S) bf16)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (D64 fwd: rab (interleaved groups), rab! (run 3's kernel))"
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
