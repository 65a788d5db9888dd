#!/bin/bash
# rabb36 (issue 39, session 33), run 1 (<= 52 s; the branch's wheel), from the root of main's tree:
#   OUT=/tmp/out_rabb36 timeout 56 bash .carry/rabb36/run1.sh
# The portable backward's default loops with rab through shared memory (kPdsRabSmem; ~10 = fp8_fwd_var=10: main's
# rab path, per-element rab loads and drab stores).
# 1. GPU tests: test_sm80_backward_gpu.py -k rab_smem (D = 64 / 128 / 256 vs the fp32 reference and main's path bit
#    for bit; unaligned rab -> main's path).
# 2. Time (one process): bf16 B16 S4K H4 backward, D = 128 / 64 / 256: causal, rab, rab~10, rabd (has_drab),
#    rabd~10, rab1d (shared rab: drab by atomics, unchanged).
source "$(dirname "$0")/setup.sh"
python3 -c "import torch; print('torch', torch.__version__)"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 24 "rab_smem" tests/hstu/test_sm80_backward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_rabb36 B1 $(( $(left) - 1 )) --reps 5 --dims 128 64 256 --dirs bwd \
    --cases causal rab rab~10 rabd rabd~10 rab1d
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (test_sm80_backward_gpu.py -k rab_smem)"
digest_tests
echo "#### time (the branch's wheel, sm90=False; bwd ms (ratio to causal); ~10 = fp8_fwd_var=10: main's rab path;"
echo "#### rab (B,H,S,S) / rab1 (B,1,S,S) bf16, d = has_drab)"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | sed -E 's/ \| q@.*//' | cut -c1-250
