#!/bin/bash
# fwd20 (issue 39, session 19), run 2 (<= 40 s), from the root of main's tree (main 939d473 on the device):
#   OUT=/tmp/o_fwd20 timeout 60 bash .carry/fwd20/run2.sh > /tmp/o_fwd20/stdout.txt 2>&1
# Run 1 ran out of time everywhere (18 tests passed, none failed, unnamed; the benchmark's first torch.profiler use
# never returned within its slot). This wheel: run 1's code, the context body's P V bound read once per sub-tile.
# 1. Tests (one pytest, -v, in this order; the branch's files in .carry/fwd20/tree): the context default (against
#    cfg 1 / 2 and the fp32 reference), the partials' bound, the split (chunks of 1, 2, 3 and the rule; masks / rab /
#    seqused / delta-q), the candidates with contexts, test_kernels_gpu.py's sm80-class forward vs the reference.
# 2. Time (no profiler): main19 (the workspace, B16 S4K D128 causal, the Zipf / dense pair at D64 / 256) and the
#    branch (the same, the exact chunks' workspace, B16 S4K causal / ctx64 at D128 / 64 / 256 with the default's tile
#    forced beside the default).
source "$(dirname "$0")/setup.sh"
T=tests/hstu/test_sm80_forward_gpu.py
echo "== 1. GPU tests ($SECONDS s)"
run_tests 19 "not (candidates and not context)" -v $T::test_sm80_forward_default_contexts_run_candidate_4 \
  $T::test_sm80_forward_split_workspace_bound $T::test_sm80_forward_split $T::test_sm80_forward_candidates \
  tests/hstu/test_kernels_gpu.py::test_sm80_and_sm90_kernels_agree_with_reference
echo "== 2. time ($SECONDS s)"
jag /tmp/site_main main19 8 --reps 5 --ws --dims 128 --zipf 64 256
jag /tmp/site_fwd20 fwd20 $((39 - SECONDS)) --reps 5 --ws --base --ctx --exact --dims 128 64 256 --zipf 64 256
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests (one pytest -v: default_contexts, split_workspace_bound, split, candidates with contexts;"
echo "#### test_kernels_gpu.py's sm80_and_sm90)"
grep -cE "PASSED" $OUT/tests.log | sed 's/^/passed: /'
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -8 | cut -c1-300
grep -E "PASSED" $OUT/tests.log | sed -E 's/.*::(test_[a-z0-9_]+)\[.*/\1/' | sort | uniq -c
echo "#### time (main19 = main 939d473's wheel, fwd20 = the branch's; sm90=False; default; base: the default's tile"
echo "#### forced (fwd_sm80_cfg 1 at D = 64 / 256, 2 at D = 128: no context skip))"
grep -E "^##|^\| |rror|Traceback|capture" $OUT/time.log | cut -c1-250
