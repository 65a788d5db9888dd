#!/bin/bash
# drab37 (issue 39, session 34), run 1 (<= 53 s), from the root of main's tree:
#   OUT=/tmp/out_drab37 timeout 56 bash .carry/drab37/run1.sh
# 1. GPU tests: test_sm80_backward_gpu.py -k "drab_written or drab_zeroed" (the rab loops' drab written whole, the
#    launcher's memset paths; each against the fp32 reference and fwd_sm80_cfg=15 bit for bit, from NaN memory).
# 2. Time (one process, interleaved, CUDA graphs): bf16 B16 S4K H4 causal backward, D = 128 / 64 / 256: causal, rab,
#    rabd (drab written whole by the kernel), rabd~15 (main's: drab zeroed by the op), rabd~8 (main's rab path).
# 3. ncu, time only, the kernels and fills of one D = 128 backward each: rabd, rabd~15.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 22 "drab_written or drab_zeroed" tests/hstu/test_sm80_backward_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_drab37 B1 $(( $(left) - 9 )) --reps 5 --dims 128 64 256 --cases causal rab rabd rabd~15 rabd~8
echo "== 3. ncu ($SECONDS s)"
ncu_bench /tmp/site_drab37 5 'hstu|Fill|elementwise' gpu__time_duration.sum ncu --ncu --dims 128 --cases rabd rabd~15
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (-k 'drab_written or drab_zeroed'; the progress line if cut by the time)"
digest_tests
digest_progress
echo "#### time (bwd ms (ratio to causal); ~15 main's drab zeroed by the op, ~8 main's rab path)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (D128 bwd, us per kernel: rabd, rabd~15)"
ncu_times $OUT/ncu.csv | head -16
