#!/bin/bash
# fp8d256 run 1 (<= 53 s), from the root of main's tree: OUT=/tmp/out_fp8d256 timeout 56 bash .carry/fp8d256/run1.sh
# 1. tests (the branch's _C.so on main43's wheel): the FP8 backward at D = 256 (its split-D kernel, default kQSplit)
#    against its fp64 emulation (descale modes tensor / block x the 5 masks); the lab kernel (diag 512 = sync: wg 0's
#    S^T and pointwise, wg 1's dP^T) x 5 masks, rows outside the sequences (D = 128, 64, 256), the dq workspace maps
#    (D = 64 / 128 / 256), the refusals
# 2. timing, one process (d256_ab.py: benchmarks/hstu_fp8_bwd.py's inputs and interleaved_ms, L2 flushed, random
#    order, median of 5): bf16 Hopper backward / dequantized path (main's FP8 backward at D = 256) / FP8 kernel path
#    default / lab kernel, B16 S16K and S4K H4 D256 causal, block descale; then benchmarks/hstu_fp8_bwd.py --hdim 256
#    where time is left, then the head / batch_head modes and the product variants at D = 256
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 18 "d256 and (tensor or block) and not sync" tests/hstu/test_fp8_bwd.py
run_tests 14 "d256_sync or rows_outside or workspace or refuse or ds8_store_map" tests/hstu/test_fp8_bwd.py
run_tests 8 "sm90_kernels_present" tests/hstu/test_kernels_gpu.py  # (the unit hstu_bwd_sm90_fp8_hdim256 registered)
echo "== 2. timing ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 4 )) python3 -P $C/d256_ab.py --reps 5 > $OUT/ab.log 2>&1
echo "rc $? ($SECONDS s)"
if [ $(left) -gt 14 ]; then
  PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 3 )) python3 -P $B36 --hdim 256 --reps 3 > $OUT/time.log 2>&1
  echo "rc $? ($SECONDS s)"
fi
[ $(left) -gt 6 ] && run_tests $(( $(left) - 2 )) "(d256 and head and not sync) or (variant and 256)" \
    tests/hstu/test_fp8_bwd.py
pack_out
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests; digest_progress 2>/dev/null || true
grep -hE "^\| B|rror|Traceback" $OUT/ab.log $OUT/time.log 2>/dev/null | cut -c1-200
unpack_clean
