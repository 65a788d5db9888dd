#!/bin/bash
# bwd24 (issue 39, session 22), run 3 (<= 41 s), from the root of main's tree:
#   OUT=/tmp/o_bwd24 timeout 60 bash .carry/bwd24/run3.sh > /tmp/o_bwd24/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd24_run/pack.sh /work/main/.carry/bwd24)
# Run 2: the self-zeroing workspace (cfg 6) +6.6 / +5.9 % at B128 S1K D128 / D256 (gone); the convert through shared
# memory (cfg 7 against 6) -4.2 / -3.2 % there, and (memset + default + that convert) -1.1 / -1.9 % at B16 S4K D256 /
# D128. Wheel (the final code): the default convert through shared memory (16-byte row stores); no cfg added.
# 1. GPU tests: the whole test_sm80_backward_gpu.py + test_kernels_gpu.py's backward part, one process
# 2. time: the default / FA2 / the peer (interleaved rounds); main22's wheel in its own process
# 3. kernels of one backward (the default) at B128 S1K D128 and B16 S4K D256, with the time left
LIM=41
source "$(dirname "$0")/setup.sh"
SHAPES=(B128:S1024:D128 B16:S4096:D256 B16:S4096:D128 B16:S8192:D64)
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 27 $TF $TK -k "sm80 or both_families or deterministic_backward or rab_without_drab"
echo "== 2. time ($SECONDS s)"
time_vs_main 7 5 "${SHAPES[@]}"
echo "== 3. prof ($SECONDS s)"
[ $(left) -gt 3 ] && PYTHONPATH=$PP timeout $(( $(left) - 1 )) python3 -P $P24 --shapes B128:S1024:D128 \
    B16:S4096:D256 --impls ours --cfgs 0 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the branch's default (the convert through shared memory); main22 = main's wheel, own process"
