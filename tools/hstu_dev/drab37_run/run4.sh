#!/bin/bash
# drab37 (issue 39, session 34), run 4 (<= 53 s; run 3's wheel, the second version), from the root of main's tree:
#   OUT=/tmp/out_drab37 timeout 56 bash .carry/drab37/run4.sh
# 1. Time at B32 S2K (heads first: every default loop in the tail's order at D = 64 / 256, the D = 256 kernel with
#    its 4 B spill): rab / rabd / rabd~15 / causal at D = 256 / 128 / 64.
# 2. Time at B16 S4K again, a fourth case order: rabd / causal / rab / rabd~15 at D = 128 / 64 / 256.
# 3. GPU tests: test_sm80_backward_gpu.py -k drab_written (as far as the time goes).
source "$(dirname "$0")/setup.sh"
echo "== 1. time S2K ($SECONDS s)"
bench /tmp/site_drab37 B4S2K 14 --reps 5 --batch 32 --seqlen 2048 --dims 256 128 64 --cases rab rabd rabd~15 causal
echo "== 2. time S4K ($SECONDS s)"
bench /tmp/site_drab37 B4 14 --reps 5 --dims 128 64 256 --cases rabd causal rab rabd~15
echo "== 3. GPU tests ($SECONDS s)"
run_tests $(( $(left) - 1 )) "drab_written" tests/hstu/test_sm80_backward_gpu.py
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### time (bwd ms (ratio to causal); ~15 main's drab zeroed by the op)"
grep -E "^##|^\| |rror|Traceback" $OUT/time.log | cut -c1-250
echo "#### tests (-k drab_written; the progress line if cut by the time)"
digest_tests
grep -E "^[.FEsx]+ *(\[ *[0-9]+%\])?$" $OUT/tests.log | tail -2
