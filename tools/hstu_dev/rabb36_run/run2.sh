#!/bin/bash
# rabb36 (issue 39, session 33), run 2 = the final call (<= 52 s; the branch's wheel d179cee4, run 1's), from the root
# of main's tree:   OUT=/tmp/out_rabb36 timeout 56 bash .carry/rabb36/run2.sh
# 1. GPU tests: test_sm80_backward_gpu.py -k rab_smem (as run 1).
# 2. Time (one process, the case order reversed from run 1's, rab1d~10 added): bf16 B16 S4K H4 backward, D = 128 /
#    64 / 256.
# 3. ncu, time only, the hstu kernels and fills (torch's zeros: drab, dQ's workspace) of one backward each: D = 128
#    rabd, rabd~10 (drab's zeroing apart).
# 4. GPU tests of the existing suites whose default runs the rab path (aligned lengths: the 2,200-key batch-first
#    lists) against their comparison cfgs (main's rab path there): stsm_pds, d64_loop_cfgs, mbar_batch_first, ksplit,
#    their rab cases (local_target / target_group).
source "$(dirname "$0")/setup.sh"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "== 1. GPU tests ($SECONDS s)"
run_tests 14 "rab_smem" tests/hstu/test_sm80_backward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabb36 B2 11 --reps 5 --dims 128 64 256 --dirs bwd --cases rab1d~10 rab1d rabd~10 rabd rab~10 rab causal
echo "== 3. ncu ($SECONDS s)"
if [ -n "$NCU" ]; then
  PYTHONPATH=/tmp/site_rabb36 timeout 10 $NCU --clock-control none -k 'regex:hstu|Fill' --metrics gpu__time_duration.sum --csv \
      python3 -P $J ncu --ncu --dims 128 --dirs bwd --cases rabd rabd~10 > $OUT/ncu.csv 2> $OUT/ncu.err
  echo "rc $? (ncu, $SECONDS s)"
fi
echo "== 4. GPU tests, existing suites ($SECONDS s)"
mv $OUT/tests.log $OUT/tests1.log
run_tests $(( $(left) - 1 )) "(stsm_pds or d64_loop_cfgs or mbar_batch_first or ksplit) and (local_target or target_group)" \
    tests/hstu/test_sm80_backward_gpu.py
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests 1 (-k rab_smem)"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests1.log | tail -6 | cut -c1-300
echo "#### tests 4 (existing suites' rab cases; the progress line if cut by the time)"
digest_tests
grep -E "^[.FEsx]+ *(\[ *[0-9]+%\])?$" $OUT/tests.log | tail -2
echo "#### time (the branch's wheel, sm90=False; bwd ms (ratio to causal); ~10 = fp8_fwd_var=10: main's rab path;"
echo "#### rab (B,H,S,S) / rab1 (B,1,S,S) bf16, d = has_drab)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (D128 bwd, us per kernel: rabd, rabd~10)"
python3 - $OUT/ncu.csv <<'PY' 2>&1 | head -24
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, vi, ii, ui = head.index("Kernel Name"), head.index("Metric Value"), head.index("ID"), head.index("Metric Unit")
for r in rows[1:]:
    v = float(r[vi].replace(",", "")) * {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(r[ui], 1.0)
    k = r[ki].replace("void ", "").replace("(hstu::HstuParams, int)", "").replace("(hstu::HstuParams)", "")
    print(r[ii], f"{v:9.1f}", k[:40] + (" .. " + k[-40:] if len(k) > 80 else k[40:80]))
PY
