#!/bin/bash
# fp8d256 run 1 (<= 53 s), from the root of main's tree: OUT=/tmp/out_fp8d256 timeout 56 bash .carry/fp8d256/run1.sh
# 1. tests (the branch's _C.so on main43's wheel): the FP8 backward at D = 256 (its split-D kernel, default kQSplit)
#    against its fp64 emulation (descale modes tensor / block x the 5 masks; the lab kernel = diag 512: wg 0's S^T
#    and pointwise, wg 1's dP^T)
# 2. timing, one process (d256_ab.py: benchmarks/hstu_fp8_bwd.py's inputs and interleaved_ms, L2 flushed, random
#    order, median of 5): bf16 Hopper backward / dequantized path (main's FP8 backward at D = 256) / FP8 kernel path
#    default / lab kernel, B16 S16K and S4K H4 D256 causal, block descale
# 3. tests in the time left: the lab kernel x 5 masks, rows outside (D = 128, 64, 256), the refusals, the dS8 store
#    mirror, the unit list, head / batch_head modes and the product variants at D = 256
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 16 "d256 and (tensor or block) and not sync" tests/hstu/test_fp8_bwd.py
echo "== 2. timing ($SECONDS s)"
t=$(( $(left) - 8 )); [ $t -gt 20 ] && t=20
PYTHONPATH=/tmp/site_$NAME timeout $t python3 -P $C/d256_ab.py --reps 5 > $OUT/ab.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. tests ($SECONDS s)"
[ $(left) -gt 4 ] && run_tests $(( $(left) - 2 )) "d256_sync or rows_outside or refuse or ds8_store_map or \
    sm90_kernels_present or (d256 and head and not sync) or (variant and 256)" tests/hstu/test_fp8_bwd.py \
    tests/hstu/test_kernels_gpu.py
pack_out
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests; digest_progress 2>/dev/null || true
grep -hE "^\| B|rror|Traceback" $OUT/ab.log 2>/dev/null | cut -c1-200
unpack_clean
