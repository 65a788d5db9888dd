#!/bin/bash
# fp8b64 run 2 (<= 53 s), from the root of main's tree: OUT=/tmp/out_fp8b64 timeout 56 bash .carry/fp8b64/run2.sh
# 1. tests run 1 did not reach (its carry predates them): the default routing (D = 64 FP8 calls now take the kernel,
#    dk / dv bit-equal to fp8_bwd=True; D = 256 / rab / deterministic the dequantized path), D = 64 FP8 calls
#    without a host sync (test_fp8.py), the graph capture and bad-input records of the path
# 2. timing again (run 1's table once more, median of 9: the spread between runs), D = 64 then D = 128
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 14 "default_routing or graph_capture or bad_scale or bad_int32" tests/hstu/test_fp8_bwd.py
run_tests 8 "never_synchronizes" tests/hstu/test_fp8.py
echo "== 2. timing ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) python3 -P $B36 --hdim 64,128 --no-dequant --reps 9 \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests; digest_progress 2>/dev/null || true
grep -E "^\| B|rror|Traceback" $OUT/time.log | cut -c1-230
