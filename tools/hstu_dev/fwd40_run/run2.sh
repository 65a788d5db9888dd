#!/bin/bash
# fwd40 (issue 39, session 37), run 2 (<= 52 s), from the root of main's tree, the branch's wheel (fwd40: main40 +
# kernel_options(fwd_sm80_skip=True), the D = 128 default's warp skip of wholly masked sub-tiles, and
# fwd_sm80_qearly=True, its Q copy before the mask's setup; both opt-in):
#   OUT=/tmp/out_fwd40 timeout 56 bash .carry/fwd40/run2.sh
# 1. GPU test: test_sm80_forward_skip_d128 (skip / qearly / both against the fp32 reference, poisoned outputs, bit
#    for bit the default's; causal / local / targets / delta-q / seqused)
# 2. B128 S1K D128 and B256 S256 D256: the default (main's kernels), skip, qearly (fwd_sm80_qearly=True: Q's copy
#    before the mask's setup), sq (both) and FA2, timed
#    three ways in one process (t40.py: ev = the table's L2-flushed single calls, two rounds; graph = CUDA graphs of
#    10 calls; kern = the profiler's kernel sums): the skip's gain, and whether the loss since session 32 is inside
#    the kernel (at D = 256 skip / qearly / sq = the default: repeats, the noise)
#    then main / skip / qearly / sq against FA2 along constant tokens (B x S = 128K, D128: S256, S4K, S512, S2K), the
#    same process (a shape that time leaves out is not printed)
source "$(dirname "$0")/setup.sh"
echo "GPU: $GPU $(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader)"
echo "== 1. tests ($SECONDS s)"
run_tests 18 "skip_d128" tests/hstu/test_sm80_forward_gpu.py
echo "== 2. variants and sweep ($SECONDS s)"
PYTHONPATH=/tmp/site_fwd40 timeout $(( $(left) - 2 )) python3 -P $T40 table --bench $R/benchmarks --reps 8 \
    --warm-ms 60 --variants main skip qearly sq --sweep-variants 4 --var-shapes B128:S1024:D128 B256:S256:D256 \
    --shapes B128:S1024:D128 B256:S256:D256 B512:S256:D128 B32:S4096:D128 B256:S512:D128 B64:S2048:D128 \
    > $OUT/t1.log 2>&1
echo "rc $? ($SECONDS s)"
SMI=$(nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader)
echo "################ DIGEST ($GPU; $SMI; done at $SECONDS s)"
python3 $C/dig40.py $OUT/t1.log /nonexistent /nonexistent | grep -vE "^\((/nonexistent|no ncu)" | cut -c1-200
digest_tests
