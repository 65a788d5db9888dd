#!/bin/bash
# split39 (issue 39, session 36), run 1 (<= 53 s), from the root of main's tree (main39 on the device):
#   OUT=<dir> timeout 56 bash .carry/split39/run1.sh
# The branch: the backward's split by the default's rule (fwd_sm80_cfg=8 always, 14 never), zipfb38's one-pass list
# kernel, the split kernel launched under the list kernel (PDL).
# 1. GPU tests: test_sm80_backward_split_gpu.py (the split at D = 64 / 128 / 256 x masks x chunks, many sequences,
#    D = 256's loops, the default's rule: kernels that run, error rule in both dQ modes, rab / cfg 14 never split).
# 2. The backward (bf16 H4): main (14) / default (0, the rule) / split (8) on the Zipf pair and around the rule's
#    bound; main's wheel: main (0) / its split (14, three-pass list, no PDL) on the pair.
# 3. The many-sequences case repeated (the one-pass list kernel's device failure in session 35): this wheel and main's.

source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests, with 3. the many-sequences repeats beside them (3 processes on the GPU, as the merged tree's
== test call that failed ran its groups) ($SECONDS s)"
diag /tmp/site_split39 20 split39 8 12 128 64 &
P1=$!
diag /tmp/site_main 20 main39 14 12 128 &
P2=$!
run_tests 26 "split" tests/hstu/test_sm80_backward_split_gpu.py
wait $P1 $P2
echo "== 2. time ($SECONDS s)"
bench /tmp/site_split39 $(( $(left) - 10 )) run1 --var main=14 default=0 split=8 --edge --reps 3
bench /tmp/site_main $(( $(left) - 2 )) run1-main39 --var main=0 split=14 --reps 3
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests"
digest_tests
echo "#### diag (many sequences repeated)"
cat $OUT/diag.log 2>/dev/null | grep -E "diag|rror" | cut -c1-260 | tail -8
echo "#### time (main = fwd_sm80_cfg=14 never split, default = the rule, split = 8 always; ms (TFLOP/s at 2.5x))"
digest_time
