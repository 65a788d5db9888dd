#!/bin/bash
# rab40 (issue 39, session 37), run 2 (<= 53 s; the branch's wheel: main40's objects + the branch's fwd bf16 D = 64 /
# 128 / 256 units and hstu_ops.cc), from the root of main's tree:
#   OUT=/tmp/out_rab40 timeout 56 bash .carry/rab40/run2.sh
# Since run 1: kernel_options(fwd_sm80_rab_evict=True) (opt-in): the defaults with rab copy their rab tiles inside the
# sequence with an L2 evict-first policy (FwdSm80QregRabWHE, FwdSm80QregRabL128E, FwdSm80PairsPfRabFE; case rabev).
# D = 64's evict-first copies could fault as branch rabf39's did: its tests and timing run last in their process.
# 1. GPU tests: test_sm80_forward_rab_smem (18) then test_sm80_forward_rab_evict (6: kernel names, bit-equal outputs).
# 2. Time: bf16 B16 S4K H4 forward D = 128, 256, then 64: causal / rab / rabev / rab:9 (main40's kernels).
# 3. ncu (the time left): D = 128 / 64 rab, rabev (DRAM bytes read, L2 hit rate, time).
LIM=53
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 18 "rab_smem or rab_evict" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rab40 Ea 15 --reps 7 --dims 128 256 64 --dirs fwd --cases causal rab rabev rab:9
echo "== 3. ncu ($SECONDS s)"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum
ncu_bench /tmp/site_rab40 5 hstu_fwd $M ncu --ncu --dims 128 64 --dirs fwd --cases rab rabev
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_forward_gpu.py -k 'rab_smem or rab_evict')"
digest_tests
echo "#### time (branch wheel, sm90=False; ms (ratio to causal); rab = the branch's defaults (D64 RabWH, D128 RabL128,"
echo "#### D256 PairsPfRabF); rabev = fwd_sm80_rab_evict=True; :9 = main40's D64 / D128 kernels (D256: = rab))"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
echo "#### ncu (ID kernel metrics; order: D128 rab, rabev, D64 rab, rabev)"
ncu_metrics $OUT/ncu.csv | head -12
