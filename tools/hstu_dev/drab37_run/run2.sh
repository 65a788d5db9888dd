#!/bin/bash
# drab37 (issue 39, session 34), run 2 (<= 53 s; run 1's wheel), from the root of main's tree:
#   OUT=/tmp/out_drab37 timeout 56 bash .carry/drab37/run2.sh
# 1. GPU tests of the existing suites that reach the new drab paths: test_sm80_backward_gpu.py -k rab_smem (rabb36's:
#    the default vs main's rab path, fwd_sm80_cfg=8, now with the launcher's memset, bit for bit; unaligned rows /
#    pointer), test_device_checks_gpu.py -k "bad_values_backward_rab and sm80" (a violation: drab all NaN).
# 2. Time as run 1, the case order reversed, 7 rounds: causal / rab / rabd / rabd~15 at D = 128 / 64 / 256.
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
run_tests 26 "rab_smem or (bad_values_backward_rab and sm80)" tests/hstu/test_sm80_backward_gpu.py \
    tests/hstu/test_device_checks_gpu.py
echo "== 2. time ($SECONDS s)"
bench /tmp/site_drab37 B2 $(( $(left) - 1 )) --reps 7 --dims 128 64 256 --cases rabd~15 rabd rab causal
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (-k 'rab_smem or (bad_values_backward_rab and sm80)'; the progress line if cut by the time)"
digest_tests
digest_progress
echo "#### time (bwd ms (ratio to causal); ~15 main's drab zeroed by the op)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
