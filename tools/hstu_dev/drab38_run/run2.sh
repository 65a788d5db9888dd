#!/bin/bash
# drab38 (issue 39, session 35), run 2 (<= 53 s; the wheel of the fix after run 1: the walk's rows kept out of a block's
# zero list), from the root of main's tree:
#   OUT=/tmp/out_drab38 timeout 56 bash .carry/drab38/run2.sh
# 1. GPU tests: test_sm80_backward_gpu.py -k "drab_written or drab_zeroed or rab_smem" (the bulk zeros against the
#    op's zeroing (cfg 15) and main's 16-byte zero stores (cfg 12) bit for bit from NaN memory; the launcher's memset
#    paths; rab through shared memory vs main's rab path), test_device_checks_gpu.py -k "bad_values_backward_rab and
#    sm80" (a violation: drab all NaN).
# 2. Time, the case order reversed: bf16 H4 causal backward B16 S4K (batch first) and B32 S2K (heads first, where
#    D = 256's cfg-12 loop keeps main's 4 B spill), D = 128 / 64 / 256: rab~12 rab rabd~12 rabd causal.
# 3. ncu, time only, the kernels of one D = 128 S4K backward each: rabd, rabd~12 (if time is left).
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 30 "drab_written or drab_zeroed or rab_smem or (bad_values_backward_rab and sm80)" \
    tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_device_checks_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_drab38 B2-S4K $(( $(left) - 10 )) --reps 7 --dims 128 64 256 --cases rab~12 rab rabd~12 rabd causal
bench /tmp/site_drab38 B2-S2K $(( $(left) - 1 )) --reps 7 --batch 32 --seqlen 2048 --dims 128 64 256 \
    --cases rab~12 rab rabd~12 rabd causal
echo "== 3. ncu ($SECONDS s)"
ncu_bench /tmp/site_drab38 7 hstu_bwd_pds gpu__time_duration.sum ncu --ncu --dims 128 --cases rabd rabd~12
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (progress line if cut by the time)"
digest_tests
digest_progress
echo "#### time (bwd ms (ratio to causal); ~12 main's rab loops: drab zeros by 16-byte stores)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (D128 S4K bwd, us per kernel: rabd, rabd~12)"
ncu_times $OUT/ncu.csv | tail -4
