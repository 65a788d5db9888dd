#!/bin/bash
# bwd20 (issue 39, session 19), run 1 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_bwd20 timeout 60 bash .carry/bwd20/run.sh > /tmp/o_bwd20/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd20_run/pack.sh /work/main/.carry/bwd20; as run on the device: 00c1433, its prof20.py
# now prof17.py's D:S:VAR form, its ncu commands setup.sh's ncu_sources)
# Wheel of the branch: the default kernels are main's (their sm_90a code byte-identical); the comparison cfgs 1-3,
# 6, 7, 9-15 are gone; new opt-in (bf16, D = 64 / 128, sm_90+): cfg 1 the default body with one block barrier per
# tile pair (three Q / dO stages, two P / dS buffers), cfg 2 that with the other phase order.
# 1. GPU tests: which kernel cfg 1 / 2 run; cfg 1 / 2 vs the fp32 reference and dK / dV / drab bitwise the default's
# 2. time80.py: cfg 0 / 1 / 2 + FA2 at B16 S4K / S16K / B128 S1K D128, B16 S4K D256, B16 S8K / S4K D64 (cfg 0 is
#    main's kernel, byte for byte)
# 3. ncu, B1 S8K: D = 64 default, FA2 D = 64, FA2 D = 128, D = 128 default (source counters by part, stalls,
#    occupancy)
NAME=bwd20 MAIN=main19 LIM=42
source "$(dirname "$0")/setup.sh"  # (strict mode, OUT, R, C, left, the wheels, GPU, T80, TF, TK, gpu_tests, digest_*)
T80=$C/time80.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 8 $TF::test_sm80_backward_one_barrier_runs_its_kernel $TF::test_sm80_backward_one_barrier \
    -k "runs_its_kernel[64 or runs_its_kernel[128 or one_barrier[64-jagged or one_barrier[128-jagged"
echo "== 2. time80 ($SECONDS s)"
PYTHONPATH=/tmp/site_$NAME timeout 11 python3 -P $T80 $NAME --cfgs 0 1 2 --fa2 --reps 5 --only causal \
    > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
ncu_sources src20 4 $C/prof17.py --batch 1 --runs 64:8192:0 64:8192:fa2 128:8192:fa2 128:8192:0
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
digest_tests_time "cfg 0: the default (= main's kernels); cfg 1: one barrier per tile pair; cfg 2: that, other phase order; FA2"
echo "#### ncu (B1 S8K: D64 default, FA2 D64, FA2 D128, D128 default; per warp and (64 x 128) pair)"
ncu_summary
grep -E "^###|^\| |^opcodes" $OUT/src_parts.md 2>/dev/null | cut -c1-400
