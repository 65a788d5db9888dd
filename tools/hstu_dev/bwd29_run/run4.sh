#!/bin/bash
# bwd29 (issue 39, session 26), run 4 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd29 timeout 56 bash .carry/bwd29/run4.sh > /tmp/o_bwd29/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd29_run/pack.sh /work/main/.carry/bwd29)
# Wheel: the branch's final one (run 2's kernels: the sm_90+ one-barrier loops store dK / dV through shared memory;
# cfg 9 main's fragment-order stores; run 3's cfg 10 gone). GPU tests only: the epilogue test again (run 3's hung in
# its first case with cfg 10 among the cfgs), then the sm80-class backward tests runs 1-2 did not run: the
# one-barrier loop on the other masks (bitwise across cfgs 1, 2, 3, 6, 7, 9), the default against the old layouts
# (both dtypes), the dQ workspace layouts, long contexts with drab, the context kernels.
LIM=49
NAME=bwd29
BASE=main29
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_backward_gpu.py
K=tests/hstu/test_kernels_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests $(( $(left) > 4 ? $(left) - 3 : 1 )) $T::test_sm80_backward_smem_epilogue $T::test_sm80_backward_one_barrier \
    $K::test_sm80_backward_fa2_layout_matches_the_old_default $T::test_sm80_backward_dq_workspace_layouts \
    $T::test_sm80_backward_context_kernel $T::test_sm80_backward_long_contexts_drab \
    -k "not (jagged-causal or jagged-local_context or dense-target or dense-none)"
echo "" > $OUT/time.log
digest "no time table in this run (run 2 timed these kernels)"
