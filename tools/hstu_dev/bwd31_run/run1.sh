#!/bin/bash
# bwd31 (issue 39, session 28), run 1 (<= 49 s), from the root of main's tree:
#   OUT=/tmp/o_bwd31 timeout 56 bash .carry/bwd31/run1.sh > /tmp/o_bwd31/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd31_run/pack.sh /work/main/.carry/bwd31)
# Wheel: main's kernels with the launcher's heads-first / batch-first block written once
# (launch_hstu_bwd_pds_ordered: cfgs 9-12 and D = 256's one-barrier default; no kernel changed).
# 1. the whole tests/hstu/test_sm80_backward_gpu.py and test_kernel_options.py (the branch's files), -q
# 2. ncu source counters of the D = 64 default (bf16 causal H4 B2 S8K, one launch): instructions per warp and
#    (64 x 128) tile pair by SASS line (src31.csv.gz) and by part (src_parts.md), to place the cuts of task 2
LIM=49 NAME=bwd31 MAIN=main31
source "$(dirname "$0")/setup15.sh"  # bwd15's setup (OUT, R, C, left, both wheels, GPU, ncu_sources)
echo "== 1. GPU tests ($SECONDS s)"
(cd $C/tree && PYTHONPATH=/tmp/site_$NAME timeout 33 python3 -P -m pytest -q -p no:cacheprovider \
    --import-mode=importlib --tb=short -rfE tests/hstu/test_sm80_backward_gpu.py tests/hstu/test_kernel_options.py \
    > $OUT/tests.log 2>&1)
echo "rc $? (124: time ran out; $SECONDS s)"
echo "== 2. ncu ($SECONDS s)"
ncu_sources src31 1 $C/prof17.py --batch 2 --runs 64:8192:0
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
tail -6 $OUT/tests.log | cut -c1-250
grep -E "FAILED|ERROR" $OUT/tests.log | head -5 | cut -c1-250
echo "#### ncu (B2 S8K D64, the default; per warp and (64 x 128) pair)"
ncu_summary
grep -E "registers|sm__warps_active" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
grep -E "^###|^\| |^opcodes" $OUT/src_parts.md 2>/dev/null | cut -c1-400 | head -40
ls -la $OUT
