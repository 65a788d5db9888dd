#!/bin/bash
# drab38 (issue 39, session 35), run 1 (<= 53 s), from the root of main's tree:
#   OUT=/tmp/out_drab38 timeout 56 bash .carry/drab38/run1.sh
# 1. GPU tests: test_sm80_backward_gpu.py -k "drab_written or drab_zeroed or rab_smem" (the rab loops' drab written
#    whole, now with bulk zeros, against the op's zeroing (cfg 15) and main's 16-byte zero stores (cfg 12) bit for
#    bit, from NaN memory; the launcher's memset paths; rab through shared memory vs main's rab path).
# 2. Time (one process, interleaved, CUDA graphs): bf16 B16 S4K H4 causal backward, D = 128 / 64 / 256: causal,
#    rabd (zeros by bulk copies), rabd~12 (main's 16-byte stores), rab, rab~12.
# 3. ncu, time only, the kernels of one D = 128 backward each: rabd, rabd~12.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 27 "drab_written or drab_zeroed or rab_smem" tests/hstu/test_sm80_backward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_drab38 B1 $(( $(left) - 8 )) --reps 5 --dims 128 64 256 --cases causal rabd rabd~12 rab rab~12
echo "== 3. ncu ($SECONDS s)"
ncu_bench /tmp/site_drab38 5 hstu gpu__time_duration.sum ncu --ncu --dims 128 --cases rabd rabd~12
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (progress line if cut by the time)"
digest_tests
digest_progress
echo "#### time (bwd ms (ratio to causal); ~12 main's rab loops: drab zeros by 16-byte stores)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (D128 bwd, us per kernel: rabd, rabd~12)"
ncu_times $OUT/ncu.csv | tail -8
