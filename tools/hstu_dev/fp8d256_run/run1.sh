#!/bin/bash
# fp8d256 run 1 (<= 53 s), from the root of main's tree: OUT=/tmp/out_fp8d256 timeout 56 bash .carry/fp8d256/run1.sh
# 1. tests (the branch's _C.so on main43's wheel): the FP8 backward at D = 256 (its own split-D kernel) against its
#    fp64 emulation (descale modes tensor / block x the 5 masks, then head / batch_head), rows outside the sequences
#    (D = 128, 64, 256), the dq workspace maps (D = 64 / 128 / 256), the refusals; then the product variants at 256
# 2. timing, one process: bf16 Hopper backward / dequantized path (main's FP8 backward at D = 256) / pre-pass / the
#    FP8 kernel path at D = 256, B16 S16K and S4K H4 causal (benchmarks/hstu_fp8_bwd.py --hdim 256: L2 flushed,
#    random order, median of 5)
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 20 "d256 and (tensor or block)" tests/hstu/test_fp8_bwd.py
run_tests 12 "rows_outside or workspace or refuse" tests/hstu/test_fp8_bwd.py
echo "== 2. timing ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 12 )) python3 -P $B36 --hdim 256 --reps 5 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
[ $(left) -gt 6 ] && run_tests $(( $(left) - 2 )) "(d256 and (head or batch_head)) or (variant and 256)" \
    tests/hstu/test_fp8_bwd.py
pack_out
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests; digest_progress 2>/dev/null || true
grep -E "^\| B|rror|Traceback" $OUT/time.log | cut -c1-230
unpack_clean
