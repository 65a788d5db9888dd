#!/bin/bash
# bwd22 (issue 39, session 21), run 2 (<= 43 s), from the root of main's tree:
#   OUT=/tmp/o_bwd22 timeout 60 bash .carry/bwd22/run2.sh > /tmp/o_bwd22/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd22_run/pack.sh /work/main/.carry/bwd22)
# Run 1 (e4e596c): heads first -1.7 / -24.6 % at B128 S1K D128 / D256, +0.2 % D64 (69 passed in one process); cfg 6
# (the convert by lane slots, fixed) -0.5 / -2.3 / -0.7 % at B128 S1K D128 / D256, B16 S4K D256; cfg 7 (dQ converted
# behind the kernel by each (sequence, head)'s last CTA) -1.2 % at D128 but +1.7 / +1.8 / +7.4 % at D256 / D64 / S4K
# D256 (gone). Wheel (the final code): the default heads first up to 2,048 keys (D = 64 / 128 / 256), the convert pass
# by 16-byte lane slots; cfg 3 the other grid order.
# 1. GPU tests: the whole test_sm80_backward_gpu.py in one process; test_kernels_gpu's kernel-name tests
# 2. compute-sanitizer memcheck of bwd21's faulting inputs (caching allocator off), default and cfg 3, D128 / D256
# 3. time: the default / cfg 3, FA2, the peer; main21's wheel in its own process
LIM=43
source "$(dirname "$0")/setup.sh"
SHAPES=(B128:S1024:D128 B128:S1024:D256 B128:S1024:D64 B16:S4096:D128 B16:S4096:D256)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 23 $TF $TK::test_sm80_d256_backward_runs_the_layout_that_fits \
    $TK::test_sm80_backward_candidate_runs_its_kernel
echo "== 2. memcheck ($SECONDS s)"
memcheck_case 9 --dims 128 256 --cfgs 0 3
echo "== 3. time ($SECONDS s)"
PYTHONPATH=$PP timeout $(( $(left) > 12 ? 7 : $(left) / 2 + 1 )) python3 -P $B21 time --label bwd22 \
    --cfgs 0 3 --reps 5 --impls ours fa2 peer --shapes "${SHAPES[@]}" > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
PYTHONPATH=$PM timeout $(( $(left) > 2 ? $(left) - 1 : 1 )) python3 -P $B21 time --label main21 \
    --cfgs 0 --reps 5 --impls ours --shapes "${SHAPES[@]}" >> $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 the default; cfg 3 the other grid order; main21 = main's wheel, own process"
