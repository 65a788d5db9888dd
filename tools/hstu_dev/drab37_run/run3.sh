#!/bin/bash
# drab37 (issue 39, session 34), run 3 (<= 53 s; the second version's wheel, ec296987: each CTA zeros the key block
# paired with its own, in slices after each tile's phase 1), from the root of main's tree:
#   OUT=/tmp/out_drab37 timeout 56 bash .carry/drab37/run3.sh
# 1. GPU tests: test_sm80_backward_gpu.py -k "drab_written or drab_zeroed or rab_smem" (run 1's and rabb36's: the
#    default vs main's rab path, fwd_sm80_cfg=8, with the launcher's memset, bit for bit; unaligned rows / pointer),
#    test_device_checks_gpu.py -k "bad_values_backward_rab and sm80" (a violation: drab all NaN).
# 2. Time, a third case order: causal / rabd~15 / rabd / rab at D = 128 / 64 / 256.
# 3. ncu, time only, the kernels of one D = 128 backward each: rabd, rabd~15.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 29 "drab_written or drab_zeroed or rab_smem or (bad_values_backward_rab and sm80)" \
    tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_device_checks_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_drab37 B3 $(( $(left) - 9 )) --reps 5 --dims 128 64 256 --cases causal rabd~15 rabd rab
echo "== 3. ncu ($SECONDS s)"
ncu_bench /tmp/site_drab37 5 'hstu|elementwise' gpu__time_duration.sum ncu --ncu --dims 128 --cases rabd rabd~15
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (-k 'drab_written or drab_zeroed or rab_smem or (bad_values_backward_rab and sm80)'; progress if cut)"
digest_tests
digest_progress
echo "#### time (bwd ms (ratio to causal); ~15 main's drab zeroed by the op)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### ncu (D128 bwd, us per kernel: rabd, rabd~15; the first rows: the inputs' randn)"
ncu_times $OUT/ncu.csv | tail -9
