#!/bin/bash
# fp8b64 run 1 (<= 53 s), from the root of main's tree: OUT=/tmp/out_fp8b64 timeout 56 bash .carry/fp8b64/run1.sh
# 1. tests (the branch's wheel): the FP8 backward at D = 64 against its fp64 emulation (modes tensor / block x the 5
#    masks, the two product variants x masks, rows outside the sequences, graph capture, op refusals), D = 128's
#    block-mode tests beside them (the shared finishing pass / workspace changed), the workspace layout checks, the
#    registered units (hstu_bwd_sm90_fp8_hdim64 among them), the default routing (D = 64 now the kernel's, D = 256
#    dequantized), D = 64 FP8 calls without a host sync
# 2. timing, one process: bf16 Hopper backward / pre-pass / FP8 kernel path at D = 64 and D = 128, B16 S16K and
#    S4K H4 causal (benchmarks/hstu_fp8_bwd.py --hdim 64,128: L2 flushed, random order, median of 5)
source "$(dirname "$0")/setup.sh"
echo "== 1. tests ($SECONDS s)"
run_tests 8 "sm90_kernels_present" tests/hstu/test_kernels_gpu.py
run_tests 24 "d64 or (variant and 64) or rows_outside or refuse or workspace or (kernel_matches and block) or \
    default_routing" tests/hstu/test_fp8_bwd.py
run_tests 6 "never_synchronizes" tests/hstu/test_fp8.py  # (D = 64 calls: the backward now the FP8 kernel's)
echo "== 2. timing ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout $(( $(left) - 1 )) python3 -P $B36 --hdim 64,128 --no-dequant --reps 5 \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests; digest_progress 2>/dev/null || true
grep -E "^\| B|rror|Traceback" $OUT/time.log | cut -c1-230
