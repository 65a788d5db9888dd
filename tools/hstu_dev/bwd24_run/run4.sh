#!/bin/bash
# bwd24 (issue 39, session 22), timing only (~20 s; run 3's timing was cut by its tests), from the root of main's tree:
#   OUT=/tmp/o_bwd24 timeout 60 bash .carry/bwd24/run4.sh > /tmp/o_bwd24/stdout.txt 2>&1
# Wheel: ba737dc's (the final kernels; run 3's GPU tests 183 passed, 1 skipped): the default dQ convert through shared
# memory. Time: the default / FA2 / the peer (interleaved rounds), main22's wheel in its own process; then the kernels
# of one backward at B128 S1K D128.
LIM=30
source "$(dirname "$0")/setup.sh"
echo > $OUT/tests.log
echo "== time ($SECONDS s)"
time_vs_main 12 9 B128:S1024:D128 B16:S4096:D256 B16:S4096:D128 B16:S8192:D64 B128:S1024:D256
echo "== prof ($SECONDS s)"
[ $(left) -gt 3 ] && PYTHONPATH=$PP timeout $(( $(left) - 1 )) python3 -P $P24 --shapes B128:S1024:D128 \
    --impls ours --cfgs 0 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
digest "cfg 0 = the branch's default (the convert through shared memory); main22 = main's wheel, own process"
