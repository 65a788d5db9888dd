#!/bin/bash
# bwd21 (issue 39, session 20), run 1 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_bwd21 timeout 60 bash .carry/bwd21/run.sh > /tmp/o_bwd21/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd21_run/pack.sh /work/main/.carry/bwd21)
# Wheel of the branch: the default kernels are main's; new opt-in (bf16): cfg 3 (D = 64 / 128, sm_90+, no contexts)
# the one-barrier default where warps whose slice of a tile sees no key skip its MMAs (kPdsSkipEmpty); cfg 7 that and
# dQ's upper k-steps skipped where the warp's rows see none of those keys (kPdsSkipEmptyDq); cfg 9 the default with
# the first tile's S GEMM started before V and its dO landed (kPdsEarlyStart); cfg 6 the
# default kernels with the fragment-ordered dQ workspace converted by whole 16-byte lane slots (convert VEC).
# 1. GPU tests: cfg 3 / 7 / 9 vs the fp32 reference and bitwise the default's (one_barrier), which kernel runs, the dQ
#    workspace layouts (cfg 0 / 6 / 8, D 64 / 128 / 256, causal, bf16 + fp16)
# 2. time: ours cfg 0 / 3 / 7 / 9 / 6, FA2, NVIDIA's Ampere HSTU (the peer) at issue 39's six shapes
# 3. prof: the kernels of one backward (device times): ours cfg 0 / 6, FA2, the peer at B128 S1K, B16 S4K D128,
#    B16 S4K D256, B16 S8K D64
# 4. ncu at B128 S1K D128: the main kernels of ours, the peer, FA2 (instructions, stalls, bytes, SM active spread)
LIM=42
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 8 $TF::test_sm80_backward_one_barrier_runs_its_kernel $TF::test_sm80_backward_one_barrier \
    $TF::test_sm80_backward_dq_workspace_layouts \
    -k "kernel[64 or kernel[128 or one_barrier[128-jagged-causal or one_barrier[64-dense-causal or one_barrier[128-jagged-target or layouts[128-causal or layouts[64-causal or layouts[256-causal"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=$PP timeout 14 python3 -P $C/bwd21.py time --cfgs 0 3 7 9 6 --reps 5 --shapes B128:S1024:D128 B16:S4096:D128 \
    B16:S16384:D128 B16:S4096:D256 B16:S8192:D64 B16:S4096:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. prof ($SECONDS s)"
PYTHONPATH=$PP timeout 5 python3 -P $C/bwd21.py prof --cfgs 0 6 --shapes B128:S1024:D128 B16:S4096:D128 \
    B16:S4096:D256 B16:S8192:D64 > $OUT/prof.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 4. ncu ($SECONDS s)"
ncu_main ncu21 "hstu_bwd_pds|flash_bwd_dq_dk_dv|hstu_bwd_compute_dq_dk_dv" 3 --shapes B128:S1024:D128
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "FAILED|ERROR|passed|failed|rror" $OUT/tests.log | tail -6
cat $OUT/time.log | cut -c1-250
cut -c1-140 $OUT/prof.log
echo "#### ncu (B128 S1K D128: ours cfg 0, the peer, FA2 in the order run; per warp and (64 x 128) pair)"
tail -2 $OUT/ncu.log | cut -c1-200
grep -E "^\| metric|inst_executed.sum |per warp and pair |issue_active.avg.pct|pipe_tensor.*pct|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|not_selected|dispatch|branch|no_inst)|gpu__time|dram__bytes|lts__t_sector_hit|sm__cycles_active|red.sum|registers" $OUT/ncu_digest.md 2>/dev/null | cut -c1-220
