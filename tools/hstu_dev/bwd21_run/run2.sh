#!/bin/bash
# bwd21 (issue 39, session 20), run 2 (<= 42 s), from the root of main's tree:
#   OUT=/tmp/o_bwd21 timeout 60 bash .carry/bwd21/run2.sh > /tmp/o_bwd21/stdout.txt 2>&1
# (carry: bash tools/hstu_dev/bwd21_run/pack.sh /work/main/.carry/bwd21)
# Run 1 (b710a30's first wheel): cfg 3 (warps skipping empty slices) +3.4 to +15 % slower everywhere (gone); cfg 6
# (the dQ convert by 16-byte lane slots) -1.2 % at B128 S1K, -0.9 % at D256: now the default; ncu at B128 S1K: ours
# 34 % L2 hits, 2.49 GB of DRAM reads, lg_throttle 0.56 per instruction, FA2 71 % / 0.81 GB / 0.08.
# Wheel of this commit: the default = main's kernels + the new convert; opt-in (bf16): cfg 3 the default kernels in
# the grid order (heads, key blocks, batch) (kPdsHeadsFirst; D = 64 / 128 one barrier, D = 256 two stages), cfg 9 the
# one-barrier default with the first tile's S GEMM before V and its dO landed (kPdsEarlyStart).
# 1. GPU tests: cfg 3 / 9 vs the fp32 reference and bitwise the default's at D = 64 / 128 / 256, which kernel runs
# 2. time: ours cfg 0 / 3 / 9, FA2, NVIDIA's Ampere HSTU (the peer) at issue 39's six shapes
# 3. ncu (time left): B128 S1K D128, ours cfg 0 and cfg 3 (L2 hits, DRAM bytes, stalls)
LIM=42
source "$(dirname "$0")/setup.sh"
echo "== 1. GPU tests ($SECONDS s)"
gpu_tests 19 $TF::test_sm80_backward_one_barrier $TF::test_sm80_backward_one_barrier_runs_its_kernel \
    -k "one_barrier[128-jagged-causal or one_barrier[256-dense-causal or one_barrier[64-dense-causal or kernel[128 or kernel[256"
echo "== 2. time ($SECONDS s)"
PYTHONPATH=$PP timeout 13 python3 -P $C/bwd21.py time --cfgs 0 3 9 --reps 5 --shapes B128:S1024:D128 B16:S4096:D128 \
    B16:S16384:D128 B16:S4096:D256 B16:S8192:D64 B16:S4096:D64 > $OUT/time.log 2>&1
echo "rc $? ($SECONDS s)"
echo "== 3. ncu ($SECONDS s)"
ncu_main ncu21b "hstu_bwd_pds" 2 --shapes B128:S1024:D128 --impls ours --cfgs 0 3
echo
echo "################ DIGEST ($GPU; done at $SECONDS s)"
echo "#### tests: $(grep -c PASSED $OUT/tests.log) PASSED lines"
grep -E "PASSED|FAILED|ERROR|passed|failed|rror" $OUT/tests.log | sed 's/.*:://' | cut -c1-120 | tail -12
cat $OUT/time.log | cut -c1-250
echo "#### ncu (B128 S1K D128: ours cfg 0, cfg 3; per warp and (64 x 128) pair)"
tail -2 $OUT/ncu.log | cut -c1-200
grep -E "^\| metric|inst_executed.sum |per warp and pair |issue_active.avg.pct|pipe_tensor_cycles_active.avg|stalled_(wait|short_scoreboard|long_scoreboard|barrier|math_pipe|mio|lg_throttle|not_selected)|gpu__time|dram__bytes|lts__t_sector_hit|sm__cycles_active" $OUT/ncu_digest.md 2>/dev/null | cut -c1-200
